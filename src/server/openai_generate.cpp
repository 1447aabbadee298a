// OpenAI generation on the engine (see openai_generate.h).
#include "server/openai_generate.h"

#include "chat/chat_json.h"
#include "chat/kimi_linear.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <random>

#include "core/error.h"
#include "core/rng.h"
#include "server/api_error.h"

namespace kimi::server {
namespace {

using J = nlohmann::ordered_json;

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

int64_t code_points(const std::string& s) {
    int64_t n = 0;
    for (unsigned char c : s) n += (c & 0xC0) != 0x80;
    return n;
}

struct Choice {
    int32_t index = 0;
    size_t prompt = 0;
    std::shared_ptr<RequestStream> stream;
    std::vector<int32_t> tokens;
    std::string text;                 // the text (completions), the parsed content (chat, at the end)
    std::vector<TokenEvent> events;   // kept for non-streamed logprobs
    std::vector<int64_t> offsets;     // code points of the text before each kept event
    FinishReason finish = FinishReason::kNone;
    int32_t stop_index = -1;     // finish by a stop string: which
    int64_t cached_tokens = 0;   // prompt tokens served from the prefix cache
    bool done = false, sent_first = false;
    double t_first = -1.0, t_last = -1.0;
    int64_t text_cps = 0;   // code points of the text so far (completions text_offset)
    std::vector<chat::ToolCallOut> calls;
    // Chat: the format's output parser (Kimi-K3's channels and calls, Kimi Linear's tool-call
    // section), the deltas it released since the last event, and the reasoning channel's text.
    std::unique_ptr<chat::OutputParser> parser;
    std::vector<chat::Delta> deltas;
    std::string reasoning;
};

class Job {
public:
    Job(const GenerationJob& job, GenerateContext& ctx)
        : job_(job), ctx_(ctx), notifier_(std::make_shared<StreamNotifier>()) {
        t0_ = now_s();
        created_ = int64_t(std::time(nullptr));
        id_ = random_id(job.endpoint == Endpoint::kChat ? "chatcmpl-" : "cmpl-");
        const int32_t per_prompt = job.n;
        const uint64_t group =
            ctx.engine.new_group();   // one client request: the scheduler shares the batch fairly between them
        // All sequences are submitted at once or none is: a submission that fails (a bad prompt,
        // memory running out) leaves nothing queued, and what it had taken is freed before the
        // answer goes out, so the next request finds the memory again.
        try {
            std::vector<SamplingParams> params(size_t(per_prompt), job.params);   // choice k's seed: seed + k
            for (int32_t k = 0; k < per_prompt; ++k)
                if (job.params.seed) params[size_t(k)].seed = *job.params.seed + uint64_t(k);
            std::vector<Engine::Submission> subs;
            subs.reserve(job.prompts.size() * size_t(per_prompt));
            choices_.reserve(subs.capacity());
            for (size_t p = 0; p < job.prompts.size(); ++p) {
                for (int32_t k = 0; k < per_prompt; ++k) {
                    Choice c;
                    c.index = int32_t(p) * per_prompt + k;
                    c.prompt = p;
                    if (job.output_format) c.parser = job.output_format->new_parser(job.thinking);
                    choices_.push_back(std::move(c));
                    subs.push_back({job.prompts[p].ids, &params[size_t(k)], job.prompts[p].media});
                }
            }
            std::vector<std::shared_ptr<RequestStream>> streams = ctx.engine.submit_all(subs, notifier_, group);
            for (size_t i = 0; i < choices_.size(); ++i) choices_[i].stream = std::move(streams[i]);
        } catch (const EngineFailed& e) {
            throw ApiError(503, e.what(), "", "engine_failed");
        } catch (const Error& e) {
            throw ApiError(400, e.what());
        } catch (const std::bad_alloc&) {
            throw out_of_memory();
        }
    }
    ~Job() { cancel_all(); }

    // Left early (the client went away, an error): cancel; the engine frees the cache at its next step.
    // Allocates nothing: it runs in the destructor, also when memory ran out.
    void cancel_all() {
        for (auto& c : choices_) {
            if (c.done) continue;
            ctx_.engine.cancel(*c.stream);
            ctx_.metrics.on_finished(FinishReason::kAbort, int64_t(job_.prompts[c.prompt].ids.size()),
                                     int64_t(c.tokens.size()), now_s() - t0_);
            c.done = true;
        }
    }

    // Follows every choice until all finished. on_event is called after each event was applied;
    // on_idle when nothing came for a while. Either returning false ends it early.
    bool follow(const std::function<bool(Choice&, const TokenEvent&)>& on_event, const std::function<bool()>& on_idle) {
        uint64_t seen = 0;
        bool cancelled = false;
        size_t n_done = 0;
        while (n_done < choices_.size()) {
            bool any = false;
            for (auto& c : choices_) {
                TokenEvent e;
                while (!c.done && c.stream->try_next(e)) {
                    any = true;
                    apply(c, e);
                    n_done += c.done;
                    if (e.error) {   // the engine failed this request: the rest of it is cancelled
                        error_ = e.error;
                        return false;
                    }
                    if (!on_event) c.deltas.clear();   // one body at the end: the parsed message is read
                    if (on_event && !on_event(c, e)) return false;
                }
            }
            if (!cancelled && ctx_.abort_all && ctx_.abort_all->load()) {
                for (auto& c : choices_)
                    if (!c.done) ctx_.engine.cancel(*c.stream);
                cancelled = true;
            }
            if (any || n_done == choices_.size()) continue;
            const uint64_t before = seen;
            notifier_->wait_for(seen, std::chrono::milliseconds(500));
            if (seen == before && on_idle && !on_idle()) return false;
        }
        return true;
    }

    J usage() const {
        int64_t prompt = 0, completion = 0;
        for (const auto& p : job_.prompts) prompt += int64_t(p.ids.size());
        for (const auto& c : choices_) completion += int64_t(c.tokens.size());
        // Each prompt once (as prompt_tokens counts it): the most any of its choices took from the cache.
        std::vector<int64_t> cached(job_.prompts.size(), 0);
        for (const auto& c : choices_) cached[c.prompt] = std::max(cached[c.prompt], c.cached_tokens);
        int64_t cached_total = 0;
        for (int64_t n : cached) cached_total += n;
        return {{"prompt_tokens", prompt},
                {"completion_tokens", completion},
                {"total_tokens", prompt + completion},
                {"prompt_tokens_details", {{"cached_tokens", cached_total}}}};
    }

    J envelope(const char* object) const {
        return {{"id", id_},
                {"object", object},
                {"created", created_},
                {"model", job_.model},
                {"system_fingerprint", ctx_.system_fingerprint}};
    }

    std::string finish_name(const Choice& c) const {
        if (c.finish == FinishReason::kStop && !c.calls.empty()) return "tool_calls";
        return finish_reason_name(c.finish);
    }

    J tool_calls_json(const Choice& c) const {
        J arr = J::array();
        for (size_t i = 0; i < c.calls.size(); ++i) {
            J call;
            call["id"] = c.calls[i].id;
            call["type"] = "function";
            call["function"] = {{"name", c.calls[i].name}, {"arguments", c.calls[i].arguments}};
            arr.push_back(std::move(call));
        }
        return arr;
    }

    std::string token_str(int32_t id) const { return ctx_.tok.decode_lossy(std::span<const int32_t>(&id, 1)); }
    J token_bytes(int32_t id) const {
        J b = J::array();
        for (unsigned char ch : ctx_.tok.token_bytes(id)) b.push_back(int(ch));
        return b;
    }

    // A logprob as JSON: −inf (a token a structured-output mask refused) is −9999, as vLLM writes it.
    static double lp_json(float lp) { return std::max(double(lp), -9999.0); }

    // Chat: {"content": [{token, logprob, bytes, top_logprobs}]} for these events.
    J chat_logprobs(const std::vector<const TokenEvent*>& evs) const {
        J content = J::array();
        for (const TokenEvent* e : evs) {
            J top = J::array();
            for (const auto& [id, lp] : e->top)
                top.push_back({{"token", token_str(id)}, {"logprob", lp_json(lp)}, {"bytes", token_bytes(id)}});
            content.push_back({{"token", token_str(e->token)},
                               {"logprob", lp_json(e->logprob)},
                               {"bytes", token_bytes(e->token)},
                               {"top_logprobs", std::move(top)}});
        }
        return {{"content", std::move(content)}};
    }

    // Completions: {tokens, token_logprobs, top_logprobs, text_offset}; offsets[i] in code points.
    J completion_logprobs(const std::vector<const TokenEvent*>& evs, const std::vector<int64_t>& offsets) const {
        J tokens = J::array(), lps = J::array(), tops = J::array(), offs = J::array();
        for (size_t i = 0; i < evs.size(); ++i) {
            tokens.push_back(token_str(evs[i]->token));
            lps.push_back(lp_json(evs[i]->logprob));
            J top = J::object();
            for (const auto& [id, lp] : evs[i]->top) top[token_str(id)] = lp_json(lp);
            tops.push_back(std::move(top));
            offs.push_back(offsets[i]);
        }
        return {{"tokens", std::move(tokens)},
                {"token_logprobs", std::move(lps)},
                {"top_logprobs", std::move(tops)},
                {"text_offset", std::move(offs)}};
    }

    std::vector<Choice>& choices() { return choices_; }
    // Why the engine failed this request (memory ran out, a lost MPI rank); empty if it did not.
    const std::string& error() const {
        static const std::string none;
        return error_ ? *error_ : none;
    }

private:
    void apply(Choice& c, const TokenEvent& e) {
        const double t = now_s();
        c.cached_tokens = std::max(c.cached_tokens, e.cached_tokens);
        if (e.token >= 0) {
            if (c.t_first < 0) {
                c.t_first = t;
                ctx_.metrics.on_first_token(t - t0_);
            } else {
                ctx_.metrics.on_inter_token(t - c.t_last);
            }
            c.t_last = t;
            c.tokens.push_back(e.token);
            if (job_.logprobs && !job_.stream) {
                c.events.push_back(e);
                c.offsets.push_back(c.text_cps);
            }
        }
        if (c.parser) {
            c.parser->push(e.text, c.deltas);
        } else if (job_.endpoint == Endpoint::kChat) {   // plain content: one delta per event
            if (!e.text.empty()) c.deltas.push_back({chat::Delta::kContent, e.text, -1, {}});
            c.text += e.text;
        } else {
            c.text += e.text;
            c.text_cps += code_points(e.text);
        }
        if (e.finish != FinishReason::kNone) {
            c.finish = e.finish;
            c.stop_index = e.stop_index;
            c.done = true;
            if (c.parser) {
                c.parser->finish(c.deltas);
                const chat::AssistantMessage& m = c.parser->message();
                c.text = m.content.value_or("");
                c.reasoning = m.reasoning_content.value_or("");
                c.calls = m.tool_calls;
            }
            ctx_.metrics.on_finished(e.finish, int64_t(job_.prompts[c.prompt].ids.size()), int64_t(c.tokens.size()),
                                     (c.t_last >= 0 ? c.t_last : t) - t0_);
        }
    }

    const GenerationJob& job_;
    GenerateContext& ctx_;
    std::shared_ptr<StreamNotifier> notifier_;
    std::vector<Choice> choices_;
    double t0_ = 0.0;
    int64_t created_ = 0;
    std::string id_;
    std::shared_ptr<const std::string> error_;
};

std::string sse(const J& j) { return "data: " + j.dump(-1, ' ', false, J::error_handler_t::replace) + "\n\n"; }

}   // namespace

std::string random_id(const char* prefix) {
    static std::atomic<uint64_t> counter{std::random_device{}()};
    Rng r(counter.fetch_add(0x9e3779b97f4a7c15ull) ^ uint64_t(std::time(nullptr)));
    char buf[40];
    std::snprintf(buf, sizeof buf, "%s%016llx%08llx", prefix, (unsigned long long)r.next(),
                  (unsigned long long)(r.next() >> 32));
    return buf;
}

struct JobRun {
    JobRun(std::shared_ptr<const GenerationJob> j, const GenerateContext& c)
        : job(std::move(j)), ctx(c), run(*job, ctx) {}
    std::shared_ptr<const GenerationJob> job;
    GenerateContext ctx;
    Job run;   // refers to the two above
};

std::shared_ptr<JobRun> start_job(std::shared_ptr<const GenerationJob> job, const GenerateContext& ctx) {
    return std::make_shared<JobRun>(std::move(job), ctx);
}

nlohmann::ordered_json run_job(JobRun& jr) {
    const GenerationJob& job = *jr.job;
    Job& run = jr.run;
    run.follow(nullptr, nullptr);
    if (!run.error().empty()) throw ApiError(503, run.error(), "", "engine_error");
    const bool chat = job.endpoint == Endpoint::kChat;
    J out = run.envelope(chat ? "chat.completion" : "text_completion");
    J choices = J::array();
    for (const Choice& c : run.choices()) {
        std::vector<const TokenEvent*> evs;
        for (const auto& e : c.events) evs.push_back(&e);
        J ch;
        ch["index"] = c.index;
        if (chat) {
            J msg = {{"role", "assistant"}};
            msg["content"] = c.calls.empty() || !c.text.empty() ? J(c.text) : J(nullptr);
            if (job.output_format && job.output_format->reasons()) {   // vLLM's newer name beside the older one
                msg["reasoning_content"] = c.reasoning.empty() ? J(nullptr) : J(c.reasoning);
                msg["reasoning"] = msg["reasoning_content"];
            }
            if (!c.calls.empty()) msg["tool_calls"] = run.tool_calls_json(c);
            ch["message"] = std::move(msg);
            ch["logprobs"] = job.logprobs ? run.chat_logprobs(evs) : J(nullptr);
        } else {
            const std::string& prompt_text = job.prompts[c.prompt].text;
            ch["text"] = job.echo ? prompt_text + c.text : c.text;
            ch["logprobs"] = job.logprobs ? run.completion_logprobs(evs, c.offsets) : J(nullptr);
        }
        ch["finish_reason"] = run.finish_name(c);
        choices.push_back(std::move(ch));
    }
    out["choices"] = std::move(choices);
    out["usage"] = run.usage();
    return out;
}

JobTally job_tally(JobRun& jr) {
    JobTally t;
    const J u = jr.run.usage();
    t.prompt_tokens = u["prompt_tokens"].get<int64_t>();
    t.cached_tokens = u["prompt_tokens_details"]["cached_tokens"].get<int64_t>();
    t.completion_tokens = u["completion_tokens"].get<int64_t>();
    for (const Choice& c : jr.run.choices())
        if (c.t_first >= 0 && (t.t_first < 0 || c.t_first < t.t_first)) t.t_first = c.t_first;
    return t;
}

ChatOutcome chat_outcome(JobRun& jr) {
    const Choice& c = jr.run.choices().at(0);
    ChatOutcome o;
    o.finish = c.finish;
    o.tool_calls = !c.calls.empty();
    o.stop_index = c.stop_index;
    o.prompt_tokens = int64_t(jr.job->prompts.at(0).ids.size());
    o.cached_tokens = c.cached_tokens;
    o.completion_tokens = int64_t(c.tokens.size());
    return o;
}

std::optional<ChatOutcome> run_chat_pieces(JobRun& jr, const std::function<bool(const chat::Delta&)>& on_piece,
                                           const std::function<bool()>& on_idle) {
    KIMI_CHECK(jr.job->endpoint == Endpoint::kChat && jr.run.choices().size() == 1, "a single-choice chat job");
    // what the format's parser released for this event (plain content without one)
    auto on_event = [&](Choice& c, const TokenEvent&) -> bool {
        for (const chat::Delta& x : chat::merge_deltas(c.deltas))
            if (!on_piece(x)) return false;
        c.deltas.clear();
        return true;
    };
    if (!jr.run.follow(on_event, on_idle)) {
        if (jr.run.error().empty()) return std::nullopt;   // the client went away
        throw ApiError(503, jr.run.error(), "", "engine_error");
    }
    return chat_outcome(jr);
}

bool run_job_streaming(JobRun& jr, const std::function<bool(const std::string&)>& write) {
    const GenerationJob& job = *jr.job;
    Job& run = jr.run;
    const bool chat = job.endpoint == Endpoint::kChat;
    auto on_event = [&](Choice& c, const TokenEvent& e) -> bool {
        J chunk = run.envelope(chat ? "chat.completion.chunk" : "text_completion");
        J ch;
        ch["index"] = c.index;
        std::vector<const TokenEvent*> evs;
        if (e.token >= 0) evs.push_back(&e);
        const bool first = !c.sent_first;
        c.sent_first = true;
        if (chat) {
            J delta = J::object();
            if (first) delta["role"] = "assistant";
            // what the parser released for this token: reasoning, content, finished calls
            for (const chat::Delta& d : chat::merge_deltas(c.deltas)) {
                if (d.kind == chat::Delta::kToolCall) {
                    if (!delta.contains("tool_calls")) delta["tool_calls"] = J::array();
                    delta["tool_calls"].push_back(chat::delta_json(d)["tool_calls"][0]);
                } else {
                    delta.update(chat::delta_json(d));
                    if (d.kind == chat::Delta::kReasoning) delta["reasoning"] = d.text;
                }
            }
            c.deltas.clear();
            if (first && !delta.contains("content")) delta["content"] = "";
            ch["delta"] = std::move(delta);
            ch["logprobs"] = job.logprobs && !evs.empty() ? run.chat_logprobs(evs) : J(nullptr);
        } else {
            std::string text = e.text;
            if (first && job.echo) text = job.prompts[c.prompt].text + text;
            ch["text"] = std::move(text);
            ch["logprobs"] = job.logprobs && !evs.empty()
                ? run.completion_logprobs(evs, {c.text_cps - code_points(e.text)})
                : J(nullptr);
        }
        ch["finish_reason"] = c.done ? J(run.finish_name(c)) : J(nullptr);
        chunk["choices"] = J::array({std::move(ch)});
        if (job.continuous_usage) chunk["usage"] = run.usage();
        return write(sse(chunk));
    };
    // Nothing for a while (a long prefill, a queue): an SSE comment, which also finds out
    // whether the client is still there.
    auto on_idle = [&] { return write(": keep-alive\n\n"); };
    if (!run.follow(on_event, on_idle)) {
        if (run.error().empty()) return false;   // the client went away
        // Headers went out with 200: the error is an event of the stream, as vLLM sends it.
        return write(sse(ApiError(503, run.error(), "", "engine_error").to_json())) && write("data: [DONE]\n\n");
    }
    if (job.include_usage) {
        J chunk = run.envelope(chat ? "chat.completion.chunk" : "text_completion");
        chunk["choices"] = J::array();
        chunk["usage"] = run.usage();
        if (!write(sse(chunk))) return false;
    }
    return write("data: [DONE]\n\n");
}

}   // namespace kimi::server
