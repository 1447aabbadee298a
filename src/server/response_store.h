// ResponseStore: the OpenAI Responses API's `store` / `previous_response_id`, in memory and
// bounded: at most `capacity` responses, each kept `ttl_s` seconds, the oldest dropped first
// (also while their bytes pass `max_bytes`). A stored response keeps the conversation that led
// to it and its reply as chat messages, so a request naming it continues from there.
//
// What a stored conversation costs a request that continues it is bounded too (hostile
// clients: docs/reliability.md#the-new-routes-under-hostile-clients-issue-56): its images are kept once, as their encoded bytes
// under their SHA-256 (the messages name them "kimi-stored-image:HEX"), not as base64 text in
// every later entry of the chain; an entry is shared, never copied, by the requests that read
// it; and it knows how large it would be as a request body (body_bytes: its JSON with each
// image as the base64 a client sends), which the server holds against --max-body-mb. So a chain
// is never larger than one request could send. Thread-safe.
#pragma once
#include <chrono>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

namespace kimi::server {

// An image of a stored conversation: its encoded bytes, named by their SHA-256.
struct StoredImage {
    std::string key;              // lower-case hex SHA-256 of `bytes`
    std::vector<uint8_t> bytes;   // encoded (PNG, JPEG, ...)
};
using StoredImages = std::unordered_map<std::string, std::shared_ptr<const StoredImage>>;   // by key

// The URL that names a stored image in a stored conversation's messages.
inline constexpr const char* kStoredImageScheme = "kimi-stored-image:";

struct StoredResponse {
    std::shared_ptr<const nlohmann::ordered_json>
        messages;   // chat messages: the input (no instructions) and the reply
    std::shared_ptr<const nlohmann::ordered_json> response;   // the response object, as returned
    std::shared_ptr<const StoredImages> images;               // the images the messages name
    int64_t body_bytes = 0;                                   // the messages as a request would send them
};

// Chat messages (a conversation to store) → a StoredResponse: each data: URL image part
// becomes a reference to its bytes (decoded once, named by SHA-256); a part already naming a
// stored image keeps the one in `known` (a previous entry's). Throws kimi::Error for a stored
// name that `known` does not hold.
StoredResponse stored_conversation(nlohmann::ordered_json messages, nlohmann::ordered_json response,
                                   const StoredImages* known);

class ResponseStore {
public:
    ResponseStore(int64_t capacity, double ttl_s, int64_t max_bytes = int64_t(256) << 20);
    bool enabled() const { return capacity_ > 0; }
    void put(const std::string& id, StoredResponse r);
    std::optional<StoredResponse> get(const std::string& id);   // nullopt: unknown or expired (shared, not copied)
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
