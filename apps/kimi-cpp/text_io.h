// Whole-file reads and stdout writes for the commands that print data (tokenizer, chat format).
#pragma once
#include <string>

namespace kimi::app {

std::string read_all(const std::string& path);   // throws kimi::Error if it cannot be read
void write_out(const std::string& s);            // throws kimi::Error if stdout fails

}   // namespace kimi::app
