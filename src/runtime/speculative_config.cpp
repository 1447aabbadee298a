// SpeculativeConfig (see speculative_config.h). The defaults and checks follow vLLM's
// SpeculativeConfig.__post_init__ for the ngram method.
#include "runtime/speculative_config.h"

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace kimi {

namespace {

int32_t positive_int(const nlohmann::json& j, const char* key) {
    const nlohmann::json& v = j.at(key);
    if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > 1024)
        throw Error(std::string("--speculative-config: '") + key + "' must be an integer in [1, 1024], not " +
                    v.dump());
    return int32_t(v.get<int64_t>());
}

void read_ngram(const nlohmann::json& j, SpeculativeConfig& c) {
    const bool has_min = j.contains("prompt_lookup_min"), has_max = j.contains("prompt_lookup_max");
    c.prompt_lookup_min = has_min ? positive_int(j, "prompt_lookup_min") : 0;
    c.prompt_lookup_max = has_max ? positive_int(j, "prompt_lookup_max") : 0;
    if (!has_min && !has_max) c.prompt_lookup_min = c.prompt_lookup_max = 5;
    if (!has_min) c.prompt_lookup_min = c.prompt_lookup_max;
    if (!has_max) c.prompt_lookup_max = c.prompt_lookup_min;
    if (c.prompt_lookup_min > c.prompt_lookup_max)
        throw Error("--speculative-config: prompt_lookup_min=" + std::to_string(c.prompt_lookup_min) +
                    " must be <= prompt_lookup_max=" + std::to_string(c.prompt_lookup_max));
}

}   // namespace

SpeculativeConfig parse_speculative_config(const std::string& text) {
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
        throw Error(std::string("--speculative-config: invalid JSON: ") + e.what());
    }
    if (!j.is_object()) throw Error("--speculative-config: a JSON object is expected");
    if (j.contains("method") && j["method"] == "dspark")   // before its keys, which are its own
        throw Error(
            "--speculative-config: method 'dspark' (K3's DSpark drafts) is not built here; "
            "docs/runtime.md#dspark says what pinning its math still needs (ngram and draft_model are built)");
    for (const auto& [key, v] : j.items())
        if (key != "method" && key != "model" && key != "num_speculative_tokens" && key != "prompt_lookup_min" &&
            key != "prompt_lookup_max")
            throw Error("--speculative-config: unknown key '" + key +
                        "' (known: method, model, num_speculative_tokens, prompt_lookup_min, prompt_lookup_max)");
    const auto str = [&](const char* key) {
        if (!j.contains(key)) return std::string();
        if (!j[key].is_string()) throw Error(std::string("--speculative-config: '") + key + "' must be a string");
        return j[key].get<std::string>();
    };
    SpeculativeConfig c;
    std::string method = str("method");
    c.model = str("model");
    if (method.empty() && (c.model == "ngram" || c.model == "[ngram]")) method = "ngram";
    if (method == "ngram" || method == "[ngram]") {
        c.method = SpeculativeConfig::Method::kNgram;
        c.model.clear();
        read_ngram(j, c);
    } else if (method == "draft_model") {
        c.method = SpeculativeConfig::Method::kDraftModel;
        if (c.model.empty()) throw Error("--speculative-config: method draft_model needs 'model' (its directory)");
        if (j.contains("prompt_lookup_min") || j.contains("prompt_lookup_max"))
            throw Error("--speculative-config: prompt_lookup_min/max belong to the ngram method");
    } else {
        throw Error("--speculative-config: method '" + method + "' is not supported here (ngram, draft_model)");
    }
    if (!j.contains("num_speculative_tokens"))
        throw Error("--speculative-config: 'num_speculative_tokens' is required");
    c.num_speculative_tokens = positive_int(j, "num_speculative_tokens");
    return c;
}

std::string SpeculativeConfig::describe() const {
    const std::string k = "k=" + std::to_string(num_speculative_tokens);
    switch (method) {
        case Method::kNgram:
            return "ngram, " + k + ", n-grams " + std::to_string(prompt_lookup_min) + ".." +
                std::to_string(prompt_lookup_max);
        case Method::kDraftModel: return "draft model " + model + ", " + k;
        default: return "off";
    }
}

}   // namespace kimi
