// ArgParser: the flag parser shared by every subcommand. Flags are read on demand
// (`--name value`, `--name=value`, boolean `--name`); done() rejects anything left over,
// so a typo is an error, never silently ignored, and names the flag it most likely meant.
// Every accessor also records the flag it was asked for (name, value kind, default, help):
// with `--help` (or `-h`) among the words the accessors return their defaults and done()
// throws HelpShown with that record as the command's help, so the help is the parser's own
// table and cannot drift from it. Errors throw kimi::Error.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kimi::app {

// The command's help, thrown by ArgParser::done() under --help (main prints it, exit 0).
struct HelpShown {
    std::string text;
};
// The help recorded so far when a command stopped before done() under --help (a check that
// needs real values threw): main prints it instead of the error. nullopt when not asked.
std::optional<std::string> help_so_far();

class ArgParser {
public:
    ArgParser(std::string command, int argc, char** argv);   // argv: the words after the subcommand

    // `help`: one line for --help (empty: the name, kind and default say it all).
    bool flag(const std::string& name, const char* help = "");                        // boolean switch
    bool has(const std::string& name) const;                                          // given? (does not consume it)
    std::optional<std::string> opt(const std::string& name, const char* help = "");   // value if given
    std::string str(const std::string& name, const std::string& def, const char* help = "");
    std::string required(const std::string& name, const char* help = "");
    int64_t integer(const std::string& name, int64_t def, const char* help = "");
    double real(const std::string& name, double def, const char* help = "");
    // Within bounds: "NAME must be in [lo, hi], got V" otherwise (the bounds show in --help).
    int64_t integer(const std::string& name, int64_t def, int64_t lo, int64_t hi, const char* help = "");
    // [lo, hi], or (lo, hi] when lo_open.
    double real(const std::string& name, double def, double lo, double hi, bool lo_open, const char* help = "");
    std::vector<std::string> list(const std::string& name, const char* help = "");   // repeated flag
    // vLLM's nargs form: the words after the flag up to the next flag (`--name a b`), and each
    // repeat of it; `--name=a` gives one. Read it before positionals().
    std::vector<std::string> values(const std::string& name, const char* help = "");
    std::string choice(const std::string& name, const std::string& def, const std::vector<std::string>& allowed,
                       const char* help = "");
    // Non-flag words; `what` names them for --help (e.g. "MODEL").
    std::vector<std::string> positionals(const char* what = "ARG", const char* help = "");
    bool help_requested() const { return help_; }
    void done();

private:
    std::optional<std::string> take(const std::string& name);
    void note(const std::string& name, const std::string& value, const std::string& def, const char* help);
    std::string command_;
    std::vector<std::string> words_;
    std::vector<bool> used_;
    bool help_ = false;
};

int64_t parse_int(const std::string& what, const std::string& s);
double parse_real(const std::string& what, const std::string& s);
std::vector<int32_t> parse_int_list(const std::string& what, const std::string& s);   // "1,2,3"

}   // namespace kimi::app
