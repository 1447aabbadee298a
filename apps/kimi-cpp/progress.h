// Progress: a one-line progress bar on stderr for long work (load, prefill, benches);
// silent when stderr is not a terminal or when quiet.
#pragma once
#include <chrono>
#include <string>

namespace kimi::app {

class Progress {
public:
    Progress(std::string label, bool quiet);
    void update(double done, double total, const char* unit);
    void finish();

private:
    std::string label_;
    bool active_;
    std::chrono::steady_clock::time_point start_, last_;
    bool drawn_ = false;
};

}   // namespace kimi::app
