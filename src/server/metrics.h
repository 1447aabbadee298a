// ServerMetrics: the counters and latency histograms behind GET /metrics, rendered in the
// Prometheus text format (version 0.0.4) with vLLM's metric names under the `kimi:` prefix,
// plus the engine's gauges and counters (running/waiting, cache usage, attention-output
// copies, heap allocations per step) and, with images, the vision encoder's. Thread-safe.
#pragma once
#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/vision_encoder.h"

#include "runtime/engine.h"
#include "server/http_listener.h"

namespace kimi::server {

class Histogram {
public:
    explicit Histogram(std::vector<double> bounds);   // upper bounds, ascending (seconds)
    void observe(double v);
    void render(std::string& out, const std::string& name, const std::string& help) const;

private:
    std::vector<double> bounds_;
    std::vector<uint64_t> counts_;   // per bucket (not cumulative); last = +Inf
    double sum_ = 0.0;
    uint64_t n_ = 0;
};

class ServerMetrics {
public:
    ServerMetrics();

    // One finished choice (a request to the engine).
    void on_finished(FinishReason why, int64_t prompt_tokens, int64_t generation_tokens, double e2e_s);
    void on_first_token(double ttft_s);
    void on_inter_token(double itl_s);
    void on_http_request(int status);            // every HTTP response, by status class
    void on_grammar_compiled(double seconds);    // one structured-output request's grammar
    void on_image_memory_wait(double seconds);   // a request whose images waited for --mm-memory

    // vision: the image encoder's counters (K3 with its tower; null otherwise).
    std::string render(const EngineSnapshot* engine, bool ready, const ListenerStats& connections,
                       const VisionEncoder::Stats* vision = nullptr) const;
    void set_weight_bytes(int64_t bytes) { weight_bytes_ = bytes; }   // the model's, once loaded

private:
    mutable std::mutex mu_;
    std::array<uint64_t, 4> finished_{};   // indexed by FinishReason (kStop, kLength, kAbort; 0 unused)
    uint64_t prompt_tokens_ = 0, generation_tokens_ = 0;
    std::array<uint64_t, 6> http_{};   // 1xx..5xx, [0] unused
    Histogram ttft_, itl_, e2e_, grammar_compile_;
    uint64_t image_memory_waits_ = 0;
    double image_memory_wait_s_ = 0.0;
    std::atomic<int64_t> weight_bytes_{0};
};

}   // namespace kimi::server
