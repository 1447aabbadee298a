// ApiError: an error answered to an HTTP client in OpenAI's shape,
// {"error": {"message", "type", "param", "code"}}, with its HTTP status (in Anthropic's shape on
// the Messages routes).
#pragma once
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace kimi::server {

struct ApiError : std::runtime_error {
    ApiError(int status_, std::string message, std::string param_ = "", std::string code_ = "")
        : std::runtime_error(std::move(message)), status(status_), param(std::move(param_)), code(std::move(code_)) {}
    int status;
    std::string param, code;

    // OpenAI's error types by status.
    const char* type() const {
        switch (status) {
            case 401: return "authentication_error";
            case 403: return "permission_error";
            case 404: return "not_found_error";
            case 413: return "invalid_request_error";
            case 429: return "rate_limit_error";
            case 503: return "service_unavailable";
            default: return status >= 500 ? "server_error" : "invalid_request_error";
        }
    }
    nlohmann::ordered_json to_json() const {
        return {{"error",
                 {{"message", what()},
                  {"type", type()},
                  {"param", param.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(param)},
                  {"code", code.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(code)}}}};
    }

    // The same error on the Anthropic Messages routes: {"type": "error", "error": {"type", "message"}}.
    const char* anthropic_type() const {
        switch (status) {
            case 401: return "authentication_error";
            case 403: return "permission_error";
            case 404: return "not_found_error";
            case 413: return "request_too_large";
            case 429: return "rate_limit_error";
            case 503: return "overloaded_error";
            default: return status >= 500 ? "api_error" : "invalid_request_error";
        }
    }
    nlohmann::ordered_json to_anthropic_json() const {
        return {{"type", "error"}, {"error", {{"type", anthropic_type()}, {"message", what()}}}};
    }
};

// 400 invalid_request_error naming the parameter.
inline ApiError bad_param(const std::string& param, const std::string& message) {
    return ApiError(400, message, param, "invalid_value");
}

// 503: memory ran out while this request was being served. Only this request fails: what it
// had queued is cancelled and the server goes on.
inline ApiError out_of_memory() {
    return ApiError(503, "the server ran out of memory for this request; retry it smaller or later", "",
                    "out_of_memory");
}

}   // namespace kimi::server
