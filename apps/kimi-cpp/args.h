// ArgParser: the flag parser shared by every subcommand. Flags are read on demand
// (`--name value`, `--name=value`, boolean `--name`); done() rejects anything left over,
// so a typo is an error, never silently ignored. Errors throw kimi::Error.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kimi::app {

class ArgParser {
public:
    ArgParser(std::string command, int argc, char** argv);   // argv: the words after the subcommand

    bool flag(const std::string& name);                        // boolean switch
    bool has(const std::string& name) const;                   // given? (does not consume it)
    std::optional<std::string> opt(const std::string& name);   // value if given
    std::string str(const std::string& name, const std::string& def);
    std::string required(const std::string& name);
    int64_t integer(const std::string& name, int64_t def);
    double real(const std::string& name, double def);
    std::vector<std::string> list(const std::string& name);   // repeated flag
    std::string choice(const std::string& name, const std::string& def, const std::vector<std::string>& allowed);
    std::vector<std::string> positionals();   // non-flag words
    void done();

private:
    std::optional<std::string> take(const std::string& name);
    std::string command_;
    std::vector<std::string> words_;
    std::vector<bool> used_;
};

int64_t parse_int(const std::string& what, const std::string& s);
double parse_real(const std::string& what, const std::string& s);
std::vector<int32_t> parse_int_list(const std::string& what, const std::string& s);   // "1,2,3"

}   // namespace kimi::app
