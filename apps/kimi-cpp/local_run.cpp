// In-process request driver for the terminal commands (see local_run.h).
#include "local_run.h"

#include <signal.h>

#include <atomic>
#include <algorithm>
#include <cstdio>

#include "core/error.h"

namespace kimi::app {

namespace {
std::atomic<bool> g_interrupt{false};
void on_sigint(int) { g_interrupt.store(true); }
}   // namespace

void install_interrupt_handler() {
    struct sigaction sa {};
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;   // no SA_RESTART
    sigaction(SIGINT, &sa, nullptr);
}

bool take_interrupt() { return g_interrupt.exchange(false); }

LocalResult run_local(Engine& engine, std::vector<int32_t> prompt, const SamplingParams& params,
                      const std::function<void(const TokenEvent&)>& on_event, bool quiet, bool keep_events,
                      bool step_stats, std::span<const MediaSpan> media) {
    LocalResult r;
    r.prompt_tokens = int64_t(prompt.size());
    auto stream = engine.submit(std::move(prompt), params, nullptr, 0, media);
    // Long prompts (several steps of prefill) show progress.
    Progress bar("prefill", quiet || r.prompt_tokens <= 2 * int64_t(engine.config().max_num_batched_tokens));
    int64_t prefilled = 0;
    bool cancelled = false;
    for (;;) {
        if (!cancelled && take_interrupt()) {
            engine.cancel(stream->id());
            cancelled = r.interrupted = true;
        }
        const bool ran = engine.step();
        if (ran && step_stats) std::fprintf(stderr, "%s\n", step_stats_json(engine.last_step()).c_str());
        if (r.tokens.empty() && ran) {
            prefilled += engine.last_step().n_prefill_tokens;
            bar.update(double(std::min(prefilled, r.prompt_tokens)), double(r.prompt_tokens), "tokens");
        }
        TokenEvent e;
        while (stream->try_next(e)) {
            if (e.token >= 0) {
                if (r.tokens.empty()) {
                    bar.finish();
                    r.first_ms = e.time_ms;
                }
                r.tokens.push_back(e.token);
                r.last_ms = e.time_ms;
            }
            r.text += e.text;
            r.finish = e.finish;
            r.cached_tokens = std::max(r.cached_tokens, e.cached_tokens);
            if (on_event) on_event(e);
            if (keep_events) r.events.push_back(std::move(e));
            if (r.finish != FinishReason::kNone) {
                bar.finish();
                return r;
            }
        }
        if (!ran && !cancelled) throw Error("internal: the engine went idle before the request finished");
    }
}

std::string step_stats_json(const EngineStepStats& s) {
    char buf[400];
    std::snprintf(buf, sizeof buf,
                  "{\"n_seqs\":%d,\"n_tokens\":%d,\"n_prefill_tokens\":%d,\"n_decode_seqs\":%d,\"n_running\":%d,"
                  "\"n_waiting\":%d,\"n_preempted\":%d,\"blocks_used\":%d,\"slots_used\":%d,\"step_ms\":%.3f,"
                  "\"attn_output_copies\":%lld,\"forward_heap_allocations\":%lld,\"step_heap_allocations\":%lld}",
                  s.n_seqs, s.n_tokens, s.n_prefill_tokens, s.n_decode_seqs, s.n_running, s.n_waiting, s.n_preempted,
                  s.blocks_used, s.slots_used, s.step_ms, (long long)s.attn_output_copies,
                  (long long)s.heap_allocations, (long long)s.step_heap_allocations);
    return buf;
}

std::string timing_line(const LocalResult& r) {
    char buf[256];
    const double decode_ms = r.last_ms - r.first_ms;
    std::snprintf(
        buf, sizeof buf,
        "prefill %lld tok (%lld from the prefix cache) %.1f ms (%.1f tok/s) | decode %zu tok %.1f ms (%.1f tok/s) | "
        "TTFT %.1f ms | finish %s",
        (long long)r.prompt_tokens, (long long)r.cached_tokens, r.first_ms, r.prefill_tok_per_s(),
        r.tokens.size() > 0 ? r.tokens.size() - 1 : 0, decode_ms, r.decode_tok_per_s(), r.first_ms,
        finish_reason_name(r.finish));
    return buf;
}

}   // namespace kimi::app
