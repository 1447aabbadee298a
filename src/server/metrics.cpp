// Prometheus text rendering of the server and engine metrics (see metrics.h).
#include "server/metrics.h"

#include "core/mapped_file.h"

#include <cstdio>

namespace kimi::server {

namespace {
void line(std::string& out, const char* fmt, const std::string& name, double v) {
    char buf[256];
    std::snprintf(buf, sizeof buf, fmt, name.c_str(), v);
    out += buf;
}
void header(std::string& out, const std::string& name, const char* type, const std::string& help) {
    out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}
void counter(std::string& out, const std::string& name, const std::string& help, double v) {
    header(out, name, "counter", help);
    line(out, "%s %.17g\n", name, v);
}
void gauge(std::string& out, const std::string& name, const std::string& help, double v) {
    header(out, name, "gauge", help);
    line(out, "%s %.17g\n", name, v);
}
}   // namespace

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double v) {
    size_t i = 0;
    while (i < bounds_.size() && v > bounds_[i]) ++i;
    ++counts_[i];
    sum_ += v;
    ++n_;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& help) const {
    header(out, name, "histogram", help);
    uint64_t cum = 0;
    char buf[256];
    for (size_t i = 0; i < bounds_.size(); ++i) {
        cum += counts_[i];
        std::snprintf(buf, sizeof buf, "%s_bucket{le=\"%g\"} %llu\n", name.c_str(), bounds_[i],
                      (unsigned long long)cum);
        out += buf;
    }
    cum += counts_.back();
    std::snprintf(buf, sizeof buf, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.17g\n%s_count %llu\n", name.c_str(),
                  (unsigned long long)cum, name.c_str(), sum_, name.c_str(), (unsigned long long)n_);
    out += buf;
}

ServerMetrics::ServerMetrics()
    : ttft_({0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
             80.0}),
      itl_({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0}),
      e2e_({0.01, 0.05, 0.1, 0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0}),
      grammar_compile_({0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0}) {}

void ServerMetrics::on_image_memory_wait(double seconds) {
    std::lock_guard<std::mutex> lk(mu_);
    ++image_memory_waits_;
    image_memory_wait_s_ += seconds;
}

void ServerMetrics::on_grammar_compiled(double seconds) {
    std::lock_guard<std::mutex> lk(mu_);
    grammar_compile_.observe(seconds);
}

void ServerMetrics::on_finished(FinishReason why, int64_t prompt_tokens, int64_t generation_tokens, double e2e_s) {
    std::lock_guard<std::mutex> lk(mu_);
    ++finished_[size_t(why) & 3];
    prompt_tokens_ += uint64_t(prompt_tokens);
    generation_tokens_ += uint64_t(generation_tokens);
    e2e_.observe(e2e_s);
}

void ServerMetrics::on_first_token(double ttft_s) {
    std::lock_guard<std::mutex> lk(mu_);
    ttft_.observe(ttft_s);
}

void ServerMetrics::on_inter_token(double itl_s) {
    std::lock_guard<std::mutex> lk(mu_);
    itl_.observe(itl_s);
}

void ServerMetrics::on_http_request(int status) {
    std::lock_guard<std::mutex> lk(mu_);
    const int cls = status / 100;
    if (cls >= 1 && cls <= 5) ++http_[size_t(cls)];
}

namespace {

// Speculative decoding (vLLM's spec_decode counters): only with --speculative-config.
void render_spec_decode(std::string& out, const SpecDecodeStats& s) {
    if (s.accepted_per_pos.empty()) return;
    counter(out, "kimi:spec_decode_num_drafts_total", "Drafts verified", double(s.drafts));
    counter(out, "kimi:spec_decode_num_draft_tokens_total", "Draft tokens verified", double(s.draft_tokens));
    counter(out, "kimi:spec_decode_num_accepted_tokens_total", "Draft tokens accepted", double(s.accepted_tokens));
    const std::string name = "kimi:spec_decode_num_accepted_tokens_per_pos_total";
    header(out, name, "counter", "Draft tokens accepted, by position in the draft");
    for (size_t i = 0; i < s.accepted_per_pos.size(); ++i) {
        char buf[160];
        std::snprintf(buf, sizeof buf, "%s{position=\"%zu\"} %.17g\n", name.c_str(), i, double(s.accepted_per_pos[i]));
        out += buf;
    }
}

// The engine's gauges and counters (from its snapshot; absent while the model loads).
void render_engine(std::string& out, const EngineSnapshot& e) {
    gauge(out, "kimi:num_requests_running", "Requests in the running batch", e.n_running);
    gauge(out, "kimi:num_requests_waiting", "Requests waiting to be scheduled", e.n_waiting);
    gauge(out, "kimi:cache_memory_bytes", "KV cache and KDA state slots, allocated at start", double(e.cache_bytes));
    gauge(out, "kimi:prefix_cache_capacity_bytes", "KDA checkpoint memory of the prefix cache, allocated at start",
          double(e.checkpoint_capacity_bytes));
    gauge(out, "kimi:kv_cache_usage_perc", "Fraction of MLA cache blocks in use",
          e.blocks_total ? double(e.blocks_used) / e.blocks_total : 0.0);
    gauge(out, "kimi:cache_blocks_used", "MLA cache blocks in use", e.blocks_used);
    gauge(out, "kimi:cache_blocks_total", "MLA cache blocks", e.blocks_total);
    gauge(out, "kimi:state_slots_used", "KDA state slots in use", e.slots_used);
    gauge(out, "kimi:state_slots_total", "KDA state slots", e.slots_total);
    counter(out, "kimi:engine_steps_total", "Engine steps run", double(e.steps));
    counter(out, "kimi:prompt_tokens_computed_total", "Prompt tokens run through the model (recompute included)",
            double(e.prompt_tokens_computed));
    counter(out, "kimi:num_preemptions_total", "Requests preempted (recomputed later)", double(e.preemptions));
    counter(out, "kimi:num_fair_preemptions_total", "Sequences preempted to share the batch between client requests",
            double(e.fair_preemptions));
    counter(out, "kimi:prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache (at first admission)",
            double(e.prefix_queries));
    counter(out, "kimi:prefix_cache_hits_total", "Prompt tokens served from the prefix cache", double(e.prefix_hits));
    gauge(out, "kimi:prefix_cache_blocks_cached", "MLA blocks kept only for their cached contents (evictable)",
          e.blocks_cached);
    gauge(out, "kimi:prefix_cache_checkpoints", "KDA state checkpoints resident", e.checkpoints);
    gauge(out, "kimi:prefix_cache_checkpoints_total", "KDA state checkpoints the prefix-cache memory holds",
          e.checkpoints_total);
    gauge(out, "kimi:prefix_cache_checkpoint_bytes", "Memory of the resident KDA checkpoints",
          double(e.checkpoint_bytes));
    counter(out, "kimi:prefix_cache_checkpoints_saved_total", "KDA checkpoints written", double(e.checkpoints_saved));
    render_spec_decode(out, e.spec);
    counter(out, "kimi:attn_output_copies_total", "Attention-output copies (0 in direct mode)",
            double(e.attn_output_copies));
    counter(out, "kimi:forward_heap_allocations_total", "Heap allocations inside forward passes",
            double(e.forward_heap_allocations));
    counter(out, "kimi:step_heap_allocations_total", "Heap allocations inside whole engine steps",
            double(e.step_heap_allocations));
    gauge(out, "kimi:last_step_attn_output_copies", "Attention-output copies in the last step",
          double(e.last.attn_output_copies));
    gauge(out, "kimi:last_step_heap_allocations", "Heap allocations in the last step",
          double(e.last.step_heap_allocations));
    gauge(out, "kimi:last_step_batch_size", "Sequences in the last step", e.last.n_seqs);
    gauge(out, "kimi:last_step_tokens", "Tokens in the last step", e.last.n_tokens);
    gauge(out, "kimi:last_step_seconds", "Duration of the last step", e.last.step_ms / 1e3);
}

// The vision encoder's (a model with a vision tower).
void render_vision(std::string& out, const VisionEncoder::Stats& v) {
    counter(out, "kimi:mm_images_encoded_total", "Images run through the vision tower", double(v.misses));
    counter(out, "kimi:mm_encoder_cache_hits_total", "Images taken from the encoder cache", double(v.hits));
    counter(out, "kimi:mm_encoded_patches_total", "14x14 patches run through the vision tower",
            double(v.encoded_patches));
    counter(out, "kimi:mm_encode_seconds_total", "Time spent encoding images", v.encode_ms / 1e3);
    gauge(out, "kimi:mm_encoder_cache_images", "Images in the encoder cache", double(v.cached_images));
    gauge(out, "kimi:mm_encoder_cache_bytes", "Bytes of the encoder cache", double(v.cached_bytes));
    counter(out, "kimi:mm_encodes_stopped_total",
            "Encodes given up between tower blocks (client gone or past --request-timeout)", double(v.stopped));
    gauge(out, "kimi:mm_encodes_running", "Images being encoded now", double(v.in_flight));
}

}   // namespace

std::string ServerMetrics::render(const EngineSnapshot* e, bool ready, const ListenerStats& conn,
                                  const VisionEncoder::Stats* vision) const {
    std::string out;
    out.reserve(8192);
    std::lock_guard<std::mutex> lk(mu_);
    gauge(out, "kimi:ready", "1 when the model is loaded and the server accepts requests", ready ? 1 : 0);
    header(out, "kimi:request_success_total", "counter", "Finished requests (choices) by finish reason");
    for (FinishReason r : {FinishReason::kStop, FinishReason::kLength, FinishReason::kAbort})
        out += std::string("kimi:request_success_total{finished_reason=\"") + finish_reason_name(r) + "\"} " +
            std::to_string(finished_[size_t(r)]) + "\n";
    counter(out, "kimi:prompt_tokens_total", "Prompt tokens of finished requests", double(prompt_tokens_));
    counter(out, "kimi:generation_tokens_total", "Generated tokens of finished requests", double(generation_tokens_));
    header(out, "kimi:http_responses_total", "counter", "HTTP responses by status class");
    for (int c = 1; c <= 5; ++c)
        out += "kimi:http_responses_total{code=\"" + std::to_string(c) + "xx\"} " + std::to_string(http_[size_t(c)]) +
            "\n";
    gauge(out, "kimi:http_connections_open", "HTTP connections open now", double(conn.open));
    counter(out, "kimi:http_connections_accepted_total", "HTTP connections accepted", double(conn.accepted));
    counter(out, "kimi:http_connections_refused_total", "HTTP connections refused with 503 (--max-connections)",
            double(conn.refused));
    counter(out, "kimi:http_requests_timed_out_total",
            "Requests answered 408: head or body too slow (--request-timeout)", double(conn.timed_out));
    // Memory: resident = weights (file pages) + cache + checkpoints + the rest (heap, stacks).
    const ResidentMemory rm = resident_memory();
    header(out, "kimi:process_resident_memory_bytes", "gauge",
           "Resident memory of the server process, by kind of page");
    out += "kimi:process_resident_memory_bytes{kind=\"total\"} " + std::to_string(rm.total) + "\n";
    out += "kimi:process_resident_memory_bytes{kind=\"anon\"} " + std::to_string(rm.anon) + "\n";
    out += "kimi:process_resident_memory_bytes{kind=\"file\"} " + std::to_string(rm.file) + "\n";
    gauge(out, "kimi:weight_bytes", "Bytes of the model's weights this process holds", double(weight_bytes_.load()));
    ttft_.render(out, "kimi:time_to_first_token_seconds", "Time from request arrival to the first token");
    itl_.render(out, "kimi:inter_token_latency_seconds", "Time between consecutive tokens of a request");
    e2e_.render(out, "kimi:e2e_request_latency_seconds", "Time from request arrival to its last token");
    grammar_compile_.render(out, "kimi:grammar_compile_seconds",
                            "Compile time of each structured-output request's grammar");
    if (e) render_engine(out, *e);
    if (vision) {
        render_vision(out, *vision);
        counter(out, "kimi:mm_memory_waits_total",
                "Requests whose images waited for room in the image memory (--mm-memory)", double(image_memory_waits_));
        counter(out, "kimi:mm_memory_wait_seconds_total", "Time requests waited for room in the image memory",
                image_memory_wait_s_);
    }
    return out;
}

}   // namespace kimi::server
