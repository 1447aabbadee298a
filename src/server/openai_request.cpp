// OpenAI request parsing and validation (see openai_request.h).
#include "server/openai_request.h"
#include "server/json_fields.h"

#include "chat/kimi_linear.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <limits>

#include "core/error.h"
#include "core/json_depth.h"
#include "core/json_linear.h"
#include "runtime/structured_output.h"
#include "server/api_error.h"
#include "server/structured_request.h"

namespace kimi::server {
namespace {

using J = nlohmann::ordered_json;

using body::field;

double number(const J& b, const char* key, double def, double lo, double hi, bool lo_open = false) {
    const J* v = field(b, key);
    if (!v) return def;
    if (!v->is_number()) throw bad_param(key, std::string(key) + " must be a number");
    const double x = v->get<double>();
    if (!std::isfinite(x) || x < lo || x > hi || (lo_open && x == lo))
        throw bad_param(key,
                        std::string(key) + " must be in " + (lo_open ? "(" : "[") + J(lo).dump() + ", " + J(hi).dump() +
                            "], got " + v->dump());
    return x;
}

int64_t integer_value(const J& v, const char* key) {
    if (v.is_number_integer()) return v.get<int64_t>();
    if (v.is_number_float()) {
        const double d = v.get<double>();
        if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9e15) return int64_t(d);
    }
    throw bad_param(key, std::string(key) + " must be an integer");
}

int64_t integer(const J& b, const char* key, int64_t def, int64_t lo, int64_t hi) {
    const J* v = field(b, key);
    if (!v) return def;
    const int64_t x = integer_value(*v, key);
    if (x < lo || x > hi)
        throw bad_param(key,
                        std::string(key) + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                            "], got " + std::to_string(x));
    return x;
}

bool boolean(const J& b, const char* key, bool def) {
    const J* v = field(b, key);
    if (!v) return def;
    if (!v->is_boolean()) throw bad_param(key, std::string(key) + " must be a boolean");
    return v->get<bool>();
}

int32_t token_id(const J& v, const char* key, int32_t vocab) {
    const int64_t id = integer_value(v, key);
    if (id < 0 || id >= vocab)
        throw bad_param(key,
                        std::string(key) + ": token id " + std::to_string(id) + " is out of range [0, " +
                            std::to_string(vocab) + ")");
    return int32_t(id);
}

}   // namespace

bool serves_model(const std::string& name, const std::string& served, const std::vector<std::string>* aliases) {
    return name == served || (aliases && std::find(aliases->begin(), aliases->end(), name) != aliases->end());
}

namespace {

void check_model(const J& b, const ParseContext& c, GenerationJob& job) {
    job.model = c.served_model_name;
    const J* m = field(b, "model");
    if (!m) return;
    if (!m->is_string()) throw bad_param("model", "model must be a string");
    if (!serves_model(m->get_ref<const std::string&>(), c.served_model_name, c.model_aliases))
        throw ApiError(404,
                       "The model `" + m->get<std::string>() + "` does not exist. This server serves `" +
                           c.served_model_name + "`.",
                       "model", "model_not_found");
}

void reject_if_set(const J& b, const char* key, const std::string& why) {
    if (field(b, key))
        throw ApiError(400, std::string(key) + " is not supported: " + why, key, "unsupported_parameter");
}

// Fields both endpoints share: sampling, stopping, n, streaming.
void parse_common(const J& b, const ParseContext& c, GenerationJob& job) {
    if (!b.is_object()) throw ApiError(400, "the request body must be a JSON object");
    check_model(b, c, job);
    SamplingParams& p = job.params;
    const SamplingDefaults none, &d = c.defaults ? *c.defaults : none;
    p.temperature = float(number(b, "temperature", d.temperature.value_or(1.0), 0.0, 2.0));
    p.top_p = float(number(b, "top_p", d.top_p.value_or(1.0), 0.0, 1.0, true));
    p.top_k = int32_t(integer(b, "top_k", d.top_k.value_or(0), -1, std::numeric_limits<int32_t>::max()));
    p.min_p = float(number(b, "min_p", d.min_p.value_or(0.0), 0.0, 1.0));
    p.presence_penalty = float(number(b, "presence_penalty", 0.0, -2.0, 2.0));
    p.frequency_penalty = float(number(b, "frequency_penalty", 0.0, -2.0, 2.0));
    p.repetition_penalty = float(number(b, "repetition_penalty", d.repetition_penalty.value_or(1.0), 0.0, 10.0, true));
    if (const J* s = field(b, "seed")) p.seed = uint64_t(integer_value(*s, "seed"));
    if (const J* s = field(b, "stop")) {
        auto add = [&](const J& v) {
            if (!v.is_string()) throw bad_param("stop", "stop must be a string or an array of strings");
            if (v.get<std::string>().empty()) throw bad_param("stop", "stop strings must not be empty");
            p.stop.push_back(v.get<std::string>());
        };
        if (s->is_array()) {
            if (s->size() > 64) throw bad_param("stop", "at most 64 stop strings");
            for (const auto& v : *s) add(v);
        } else {
            add(*s);
        }
    }
    if (const J* s = field(b, "stop_token_ids")) {
        if (!s->is_array()) throw bad_param("stop_token_ids", "stop_token_ids must be an array of token ids");
        for (const auto& v : *s) p.stop_token_ids.push_back(token_id(v, "stop_token_ids", c.vocab_size));
    }
    if (const J* s = field(b, "logit_bias")) {
        if (!s->is_object()) throw bad_param("logit_bias", "logit_bias must be an object mapping token ids to biases");
        for (auto it = s->begin(); it != s->end(); ++it) {
            int64_t id = -1;
            try {
                size_t used = 0;
                id = std::stoll(it.key(), &used);
                if (used != it.key().size()) id = -1;
            } catch (const std::exception&) {
                id = -1;
            }
            if (id < 0 || id >= c.vocab_size)
                throw bad_param("logit_bias", "logit_bias key '" + it.key() + "' is not a token id in the vocabulary");
            if (!it.value().is_number() || !std::isfinite(it.value().get<double>()) ||
                std::fabs(it.value().get<double>()) > 100.0)
                throw bad_param("logit_bias", "logit_bias values must be numbers in [-100, 100]");
            p.logit_bias.push_back({int32_t(id), it.value().get<float>()});
        }
    }
    p.ignore_eos = boolean(b, "ignore_eos", false);
    p.skip_special_tokens = boolean(b, "skip_special_tokens", true);
    p.include_stop_str_in_output = boolean(b, "include_stop_str_in_output", false);
    job.n = int32_t(integer(b, "n", 1, 1, 128));
    if (const J* bo = field(b, "best_of"))
        if (integer_value(*bo, "best_of") != job.n) reject_if_set(b, "best_of", "best_of must equal n");
    job.stream = boolean(b, "stream", false);
    if (const J* so = field(b, "stream_options")) {
        if (!job.stream) throw bad_param("stream_options", "stream_options can only be set when stream is true");
        if (!so->is_object()) throw bad_param("stream_options", "stream_options must be an object");
        job.include_usage = boolean(*so, "include_usage", false);
        job.continuous_usage = boolean(*so, "continuous_usage_stats", false);
    }
    reject_if_set(b, "prompt_logprobs", "prompt logprobs are not supported by this server");
    const J* mt = field(b, "max_completion_tokens");
    if (!mt) mt = field(b, "max_tokens");
    if (mt) {
        const char* name = field(b, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
        const int64_t v = integer_value(*mt, name);
        if (v < 1) throw bad_param(name, std::string(name) + " must be at least 1");
        p.max_tokens = int32_t(std::min<int64_t>(v, std::numeric_limits<int32_t>::max()));
        job.max_tokens_given = true;
    }
}

// The output constraint (response_format, structured_outputs, guided_*), compiled once the
// request has passed every cheaper check: a large schema costs its compile only to a request
// that will run, and the compile stops when the client hangs up or the deadline passes.
void compile_constraint(const J& b, const ParseContext& c, GenerationJob& job) {
    const auto t0 = std::chrono::steady_clock::now();
    job.constraint = parse_output_constraint(b, c.poll);
    job.grammar_compile_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Prompt length vs context: 400 with the numbers (vLLM's wording).
// Also bounds the work one request may start: n × prompts sequences at most.
void fit_context(GenerationJob& job, const ParseContext& c, int32_t default_max_tokens) {
    if (c.defaults && c.defaults->max_tokens) default_max_tokens = int32_t(*c.defaults->max_tokens);
    const int64_t n_seqs = int64_t(job.prompts.size()) * job.n;
    if (n_seqs > c.max_sequences)
        throw ApiError(400,
                       "this request asks for " + std::to_string(n_seqs) + " sequences (n " + std::to_string(job.n) +
                           " x " + std::to_string(job.prompts.size()) + " prompts); the server allows at most " +
                           std::to_string(c.max_sequences) + " per request (--max-sequences-per-request)",
                       "n", "invalid_value");
    for (const auto& pr : job.prompts) {
        const int64_t len = int64_t(pr.ids.size());
        if (len >= c.max_model_len)
            throw ApiError(400,
                           "This model's maximum context length is " + std::to_string(c.max_model_len) +
                               " tokens. However, your prompt has " + std::to_string(len) +
                               " tokens. Please reduce the length of the prompt.",
                           job.endpoint == Endpoint::kChat ? "messages" : "prompt", "context_length_exceeded");
        if (job.max_tokens_given && len + job.params.max_tokens > c.max_model_len)
            throw ApiError(400,
                           "This model's maximum context length is " + std::to_string(c.max_model_len) +
                               " tokens. However, you requested " + std::to_string(len + job.params.max_tokens) +
                               " tokens (" + std::to_string(len) + " in the prompt, " +
                               std::to_string(job.params.max_tokens) +
                               " in the completion). Please reduce the length "
                               "of the prompt or completion.",
                           "max_tokens", "context_length_exceeded");
    }
    if (!job.max_tokens_given) {
        int64_t room = c.max_model_len;
        for (const auto& pr : job.prompts) room = std::min<int64_t>(room, c.max_model_len - int64_t(pr.ids.size()));
        job.params.max_tokens = int32_t(default_max_tokens > 0 ? std::min<int64_t>(default_max_tokens, room) : room);
    }
    // The work a request may ask for: every sequence's prompt and completion, summed.
    int64_t total = 0;
    for (const auto& pr : job.prompts) total += (int64_t(pr.ids.size()) + job.params.max_tokens) * job.n;
    if (total > c.max_request_tokens)
        throw ApiError(400,
                       "this request asks for " + std::to_string(total) + " tokens (prompt + max_tokens over its " +
                           std::to_string(n_seqs) + " sequences); the server allows at most " +
                           std::to_string(c.max_request_tokens) + " per request (--max-request-tokens)",
                       "max_tokens", "invalid_value");
}

PromptInput prompt_from_ids(const J& arr, const ParseContext& c) {
    PromptInput p;
    for (const auto& v : arr) p.ids.push_back(token_id(v, "prompt", c.vocab_size));
    if (p.ids.empty()) throw bad_param("prompt", "prompt must not be empty");
    if (c.tok) p.text = c.tok->decode_lossy(p.ids);
    return p;
}

PromptInput prompt_from_text(const std::string& s, const ParseContext& c) {
    if (s.empty()) throw bad_param("prompt", "prompt must not be empty");
    PromptInput p;
    p.text = s;
    p.ids = c.tok->encode(s, true);
    return p;
}

// The roles of OpenAI's chat API. Both chat formats render or skip each of them (docs/chat.md);
// any other role is a client's mistake, refused by name rather than rendered as a system
// header (Kimi Linear) or silently dropped (K3). A missing or non-string role is left to the
// formats' own message checks.
void check_roles(const J& msgs) {
    static constexpr const char* kRoles[] = {"system", "developer", "user", "assistant", "tool", "function"};
    for (size_t i = 0; i < msgs.size(); ++i) {
        if (!msgs[i].is_object()) continue;
        const auto it = msgs[i].find("role");
        if (it == msgs[i].end() || !it->is_string()) continue;
        const std::string& role = it->get_ref<const std::string&>();
        if (std::find(std::begin(kRoles), std::end(kRoles), role) != std::end(kRoles)) continue;
        std::string allowed;
        for (const char* r : kRoles) allowed += (allowed.empty() ? "" : ", ") + std::string(r);
        throw bad_param("messages",
                        "messages[" + std::to_string(i) + "].role '" + role.substr(0, 100) +
                            "' is not a chat role (allowed: " + allowed + ")");
    }
}

}   // namespace

std::string SamplingDefaults::describe() const {
    std::string s;
    auto add = [&s](const char* k, const std::string& v) { s += (s.empty() ? "" : ", ") + std::string(k) + " " + v; };
    if (temperature) add("temperature", J(*temperature).dump());
    if (top_p) add("top_p", J(*top_p).dump());
    if (top_k) add("top_k", std::to_string(*top_k));
    if (min_p) add("min_p", J(*min_p).dump());
    if (repetition_penalty) add("repetition_penalty", J(*repetition_penalty).dump());
    if (max_tokens) add("max_tokens", std::to_string(*max_tokens));
    return s;
}

SamplingDefaults read_generation_config(const std::string& model_dir) {
    SamplingDefaults d;
    const std::string path = model_dir + "/generation_config.json";
    std::ifstream f(path);
    if (!f) return d;
    J j;
    try {
        j = J::parse(f);
    } catch (const std::exception& e) {
        throw Error(path + ": not valid JSON: " + e.what());
    }
    if (!j.is_object()) throw Error(path + ": not a JSON object");
    auto num = [&](const char* k, double lo, double hi) -> std::optional<double> {
        const J* v = field(j, k);
        if (!v) return std::nullopt;
        if (!v->is_number() || !(v->get<double>() >= lo && v->get<double>() <= hi))
            throw Error(path + ": " + k + " must be a number in [" + J(lo).dump() + ", " + J(hi).dump() + "]");
        return v->get<double>();
    };
    d.temperature = num("temperature", 0.0, 2.0);
    d.top_p = num("top_p", 1e-9, 1.0);
    d.min_p = num("min_p", 0.0, 1.0);
    d.repetition_penalty = num("repetition_penalty", 1e-9, 10.0);
    if (const auto k = num("top_k", -1.0, 1e9)) d.top_k = int64_t(*k);
    if (const auto m = num("max_new_tokens", 1.0, 1e9)) d.max_tokens = int64_t(*m);
    // do_sample false means greedy in HF's generate(); as vLLM reads it, only the numbers count
    return d;
}

nlohmann::ordered_json parse_body(const std::string& body) {
    if (!json_depth_within(body))
        throw ApiError(400, "the request body is nested deeper than " + std::to_string(kMaxJsonDepth) + " levels", "",
                       "invalid_json");
    J j;
    try {
        j = parse_json_linear(body);
    } catch (const std::exception& e) {
        throw ApiError(400, std::string("the request body is not valid JSON: ") + e.what(), "", "invalid_json");
    }
    if (!j.is_object()) throw ApiError(400, "the request body must be a JSON object", "", "invalid_json");
    return j;
}

GenerationJob parse_completion_request(const J& b, const ParseContext& c) {
    GenerationJob job;
    job.endpoint = Endpoint::kCompletions;
    parse_common(b, c, job);
    reject_if_set(b, "suffix", "no fill-in-the-middle for this model");
    const J* pr = field(b, "prompt");
    if (!pr) throw ApiError(400, "prompt is required", "prompt", "missing_required_parameter");
    if (pr->is_string()) {
        job.prompts.push_back(prompt_from_text(pr->get<std::string>(), c));
    } else if (pr->is_array() && !pr->empty() && (*pr)[0].is_number()) {
        job.prompts.push_back(prompt_from_ids(*pr, c));
    } else if (pr->is_array() && !pr->empty()) {
        if (pr->size() > 256) throw bad_param("prompt", "at most 256 prompts per request");
        for (const auto& e : *pr) {
            if (e.is_string())
                job.prompts.push_back(prompt_from_text(e.get<std::string>(), c));
            else if (e.is_array())
                job.prompts.push_back(prompt_from_ids(e, c));
            else
                throw bad_param(
                    "prompt",
                    "prompt must be a string, an array of strings, an array of token ids or an array of those");
        }
    } else {
        throw bad_param(
            "prompt",
            "prompt must be a non-empty string, an array of strings, an array of token ids or an array of those");
    }
    job.echo = boolean(b, "echo", false);
    if (const J* lp = field(b, "logprobs")) {
        if (lp->is_boolean())
            throw bad_param("logprobs", "logprobs must be an integer (the number of top alternatives)");
        job.logprobs = true;
        job.params.logprobs = int32_t(integer(b, "logprobs", 0, 0, 20));
    }
    if (job.echo && job.logprobs)
        reject_if_set(b, "logprobs",
                      "logprobs together with echo needs prompt logprobs, which this server does not compute");
    fit_context(job, c, 16);
    compile_constraint(b, c, job);
    if (job.constraint) job.params.structured = std::make_shared<StructuredOutput>(std::move(*job.constraint));
    return job;
}

namespace {

// Kimi Linear: the messages as its renderer reads them; it has no vision tower, so no image parts.
std::vector<chat::ChatMessage> kimi_linear_messages(const J& msgs) {
    std::vector<chat::ChatMessage> messages;
    try {
        messages = chat::chat_messages_from_json(msgs);
    } catch (const Error& e) {
        throw bad_param("messages", e.what());
    }
    for (const auto& m : messages) {
        if (m.parts)
            for (const auto& part : *m.parts)
                if (part.is_image)
                    throw ApiError(400,
                                   "image content is not supported by this model (Kimi Linear has no vision "
                                   "tower)",
                                   "messages", "invalid_image");
    }
    return messages;
}

// The request's function tools, checked; null when there are none.
J chat_tools(const J& b) {
    J tools = nullptr;
    if (const J* t = field(b, "tools")) {
        if (!t->is_array()) throw bad_param("tools", "tools must be an array");
        for (const auto& tool : *t) {
            if (!tool.is_object() || !tool.contains("type") || tool["type"] != "function" ||
                !tool.contains("function") || !tool["function"].is_object() || !tool["function"].contains("name") ||
                !tool["function"]["name"].is_string())
                throw bad_param("tools",
                                "each tool must be {\"type\": \"function\", \"function\": {\"name\": ..., ...}}");
        }
        if (!t->empty()) tools = *t;
    }
    return tools;
}

// logprobs (a boolean here) and top_logprobs, the number of alternatives.
void chat_logprobs(const J& b, GenerationJob& job) {
    job.logprobs = boolean(b, "logprobs", false);
    if (field(b, "top_logprobs")) {
        if (!job.logprobs) throw bad_param("top_logprobs", "top_logprobs requires logprobs to be true");
        job.params.logprobs = int32_t(integer(b, "top_logprobs", 0, 0, 20));
    } else if (job.logprobs) {
        job.params.logprobs = 0;
    }
}

// The K3 format renders the request as a whole (chat_template_kwargs, reasoning_effort,
// tool results matched to calls, JSON-string arguments parsed as vLLM does); the image parts
// it meets are added to `images`.
tok::ChatPrompt render_k3(const J& b, const ParseContext& c, GenerationJob& job, std::vector<PendingImage>& images) {
    tok::ChatPrompt rendered;
    try {
        chat::ChatRequest r = chat::chat_request_from_body(b);
        r.allow_special_in_content = false;   // no control-token injection through message text
        if (c.media)
            r.images = c.media->probe_resolver(images, c.stored_images);
        else
            r.images = [](const J&, const std::string& where) -> chat::ImagePrompt {
                throw ImageError(where + ": image content is not supported (no vision tower is served)");
            };
        rendered = c.format->render(r);
        job.output_format = c.format;
        job.thinking = r.thinking;
    } catch (const ImageError& e) {
        throw ApiError(400, e.what(), "messages", "invalid_image");
    } catch (const Error& e) {
        const std::string what = e.what();
        const bool kwargs = what.find("thinking") != std::string::npos ||
            what.find("reasoning_effort") != std::string::npos ||
            what.find("chat_template_kwargs") != std::string::npos;
        throw bad_param(kwargs ? "chat_template_kwargs" : "messages", what);
    }
    // The parser reads the format's markers: keep their text (other specials still add none).
    for (const char* m : {"<|open|>", "<|close|>", "<|sep|>", "<|end_of_msg|>"})
        if (auto id = c.tok->special_id(m)) job.params.keep_special_ids.push_back(*id);
    return rendered;
}

// The reply's grammar: the response_format constraint and/or the forced tool call, inside the
// chat format's frame.
void compile_reply_grammar(GenerationJob& job, ChatFrame frame, const std::optional<ForcedTools>& forced,
                           const grammar::CompilePoll& poll) {
    const auto t0 = std::chrono::steady_clock::now();
    try {
        job.params.structured = std::make_shared<StructuredOutput>(
            frame_grammar(frame, job.thinking, std::move(job.constraint), forced, poll));
    } catch (const Error& e) {
        throw bad_param(forced ? "tool_choice" : "response_format", e.what());
    }
    job.grammar_compile_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}   // namespace

GenerationJob parse_chat_request(const J& b, const ParseContext& c) {
    GenerationJob job;
    job.endpoint = Endpoint::kChat;
    parse_common(b, c, job);
    const J* msgs = field(b, "messages");
    if (!msgs) throw ApiError(400, "messages is required", "messages", "missing_required_parameter");
    if (!msgs->is_array() || msgs->empty()) throw bad_param("messages", "messages must be a non-empty array");
    check_roles(*msgs);
    const bool k3 = c.format && std::string(c.format->name()) == "kimi-k3";
    std::vector<chat::ChatMessage> messages;
    if (!k3) messages = kimi_linear_messages(*msgs);
    const J tools = chat_tools(b);
    const J* tc = field(b, "tool_choice");
    const bool tool_choice_none = tc && tc->is_string() && *tc == "none";
    const std::optional<ForcedTools> forced = parse_forced_tools(b, tools);
    for (const char* k : {"functions", "function_call"}) reject_if_set(b, k, "deprecated; use tools");
    reject_if_set(b, "chat_template", "the model's own chat format is always used");
    if (boolean(b, "continue_final_message", false))
        reject_if_set(b, "continue_final_message", "continuing a final assistant message is not supported");
    const bool parse_tools = !tools.is_null() && !tool_choice_none;

    chat_logprobs(b, job);

    tok::ChatPrompt rendered;
    std::vector<PendingImage> images;
    if (k3) {
        rendered = render_k3(b, c, job, images);
    } else {
        chat::ChatOptions opts;
        opts.add_generation_prompt = boolean(b, "add_generation_prompt", true);
        opts.allow_special_in_content = false;   // no control-token injection through message text
        try {
            rendered = chat::render_kimi_linear(*c.tok, messages, tools, opts);
        } catch (const Error& e) {
            throw bad_param("messages", e.what());
        }
        if (parse_tools) {   // the format's parser reads the tool-call section from its markers
            job.output_format = c.format;
            for (const char* m : {"<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", "<|tool_call_begin|>",
                                  "<|tool_call_argument_begin|>", "<|tool_call_end|>"})
                if (auto id = c.tok->special_id(m)) job.params.keep_special_ids.push_back(*id);
        }
    }
    PromptInput p;
    p.ids = std::move(rendered.ids);
    p.text = std::move(rendered.text);
    p.images = std::move(images);
    job.prompts.push_back(std::move(p));
    // A reply ends at the end-of-turn tokens unless ignore_eos.
    if (!job.params.ignore_eos)
        for (int32_t id : c.tok->stop_ids())
            if (id < c.vocab_size) job.params.stop_token_ids.push_back(id);
    fit_context(job, c, 0);
    compile_constraint(b, c, job);
    if (forced && job.constraint)
        throw bad_param(
            "tool_choice",
            "a forced tool call (tool_choice) cannot be combined with response_format or structured_outputs");
    if (job.constraint || forced)
        compile_reply_grammar(job, k3 ? ChatFrame::kK3 : ChatFrame::kKimiLinear, forced, c.poll);
    return job;
}

}   // namespace kimi::server
