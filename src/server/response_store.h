// ResponseStore: the OpenAI Responses API's `store` / `previous_response_id`, in memory and
// bounded: at most `capacity` responses, each kept `ttl_s` seconds, the oldest dropped first
// (also while their bytes pass `max_bytes`). A stored response keeps the conversation that led
// to it and its reply as chat messages, so a request naming it continues from there. Thread-safe.
#pragma once
#include <chrono>
#include <cstdint>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include <nlohmann/json.hpp>

namespace kimi::server {

struct StoredResponse {
    nlohmann::ordered_json messages;   // chat messages: the input (no instructions) and the reply
    nlohmann::ordered_json response;   // the response object, as returned
};

class ResponseStore {
public:
    ResponseStore(int64_t capacity, double ttl_s, int64_t max_bytes = int64_t(256) << 20);
    bool enabled() const { return capacity_ > 0; }
    void put(const std::string& id, StoredResponse r);
    std::optional<StoredResponse> get(const std::string& id);   // nullopt: unknown or expired
    bool erase(const std::string& id);
    int64_t size();

private:
    using Clock = std::chrono::steady_clock;
    struct Entry {
        std::string id;
        StoredResponse r;
        int64_t bytes;
        Clock::time_point expires;
    };
    void evict(Clock::time_point now);   // under mu_

    int64_t capacity_;
    std::chrono::duration<double> ttl_;
    int64_t max_bytes_, bytes_ = 0;
    std::mutex mu_;
    std::list<Entry> order_;   // oldest first
    std::unordered_map<std::string, std::list<Entry>::iterator> by_id_;
};

}   // namespace kimi::server
