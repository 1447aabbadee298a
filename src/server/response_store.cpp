// The bounded response store (see response_store.h).
#include "server/response_store.h"

#include <openssl/evp.h>

#include "core/base64.h"
#include "core/error.h"

namespace kimi::server {
namespace {

using J = nlohmann::ordered_json;

std::string sha256_hex(const std::vector<uint8_t>& bytes) {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    if (EVP_Digest(bytes.data(), bytes.size(), digest, &n, EVP_sha256(), nullptr) != 1 || n != 32)
        throw Error("response store: SHA-256 (libcrypto) failed");
    static const char* hex = "0123456789abcdef";
    std::string out;
    for (unsigned int i = 0; i < n; ++i) {
        out += hex[digest[i] >> 4];
        out += hex[digest[i] & 15];
    }
    return out;
}

// The url string of an image part ({"type": "image_url", "image_url": {"url"}} or a string).
J* image_url(J& part) {
    if (!part.is_object() || part.value("type", J()) != "image_url") return nullptr;
    const auto it = part.find("image_url");
    if (it == part.end()) return nullptr;
    if (it->is_string()) return &*it;
    if (!it->is_object()) return nullptr;
    const auto url = it->find("url");
    return url != it->end() && url->is_string() ? &*url : nullptr;
}

}   // namespace

StoredResponse stored_conversation(J messages, J response, const StoredImages* known) {
    auto images = std::make_shared<StoredImages>();
    int64_t image_bytes = 0;   // as base64 data: URLs, for body_bytes
    const std::string scheme = kStoredImageScheme;
    for (J& m : messages) {
        if (!m.is_object()) continue;
        const auto content = m.find("content");
        if (content == m.end() || !content->is_array()) continue;
        for (J& part : *content) {
            J* url = image_url(part);
            if (!url) continue;
            const std::string& u = url->get_ref<const std::string&>();
            std::shared_ptr<const StoredImage> img;
            if (u.rfind(scheme, 0) == 0) {
                const std::string key = u.substr(scheme.size());
                const auto it = known ? known->find(key) : StoredImages::const_iterator();
                if (!known || it == known->end()) throw Error("response store: an image that is not stored");
                img = it->second;
            } else if (u.rfind("data:", 0) == 0) {
                const size_t comma = u.find(',');
                const size_t b64 = u.rfind(";base64", comma);
                if (comma == std::string::npos || b64 == std::string::npos) continue;   // kept as it came
                std::optional<std::string> raw = base64_decode_lenient(std::string_view(u).substr(comma + 1));
                if (!raw) continue;
                auto s = std::make_shared<StoredImage>();
                s->bytes.assign(raw->begin(), raw->end());
                s->key = sha256_hex(s->bytes);
                const auto have = images->find(s->key);
                img = have != images->end() ? have->second : std::move(s);
            } else {
                continue;   // file:// and the like: kept as given (a few bytes)
            }
            image_bytes += int64_t(4 * ((img->bytes.size() + 2) / 3)) + 32;   // "data:image/…;base64," + the text
            images->emplace(img->key, img);
            *url = scheme + img->key;
        }
    }
    StoredResponse r;
    r.body_bytes = int64_t(messages.dump(-1, ' ', false, J::error_handler_t::replace).size()) + image_bytes;
    r.messages = std::make_shared<const J>(std::move(messages));
    r.response = std::make_shared<const J>(std::move(response));
    r.images = std::move(images);
    return r;
}

ResponseStore::ResponseStore(int64_t capacity, double ttl_s, int64_t max_bytes)
    : capacity_(capacity), ttl_(ttl_s), max_bytes_(max_bytes) {}

void ResponseStore::evict(Clock::time_point now) {
    while (!order_.empty() &&
           (int64_t(order_.size()) > capacity_ || bytes_ > max_bytes_ || order_.front().expires <= now)) {
        bytes_ -= order_.front().bytes;
        by_id_.erase(order_.front().id);
        order_.pop_front();
    }
}

void ResponseStore::put(const std::string& id, StoredResponse r) {
    if (!enabled()) return;
    // what the entry holds: its conversation as a request would send it bounds its text and images
    // (images shared along a chain are counted in each entry: the cap errs on the safe side)
    const int64_t bytes =
        r.body_bytes + int64_t(r.response->dump(-1, ' ', false, J::error_handler_t::replace).size() + id.size());
    const Clock::time_point now = Clock::now();
    std::lock_guard lock(mu_);
    if (auto it = by_id_.find(id); it != by_id_.end()) {
        bytes_ -= it->second->bytes;
        order_.erase(it->second);
        by_id_.erase(it);
    }
    order_.push_back({id, std::move(r), bytes, now + std::chrono::duration_cast<Clock::duration>(ttl_)});
    by_id_[id] = std::prev(order_.end());
    bytes_ += bytes;
    evict(now);
}

std::optional<StoredResponse> ResponseStore::get(const std::string& id) {
    std::lock_guard lock(mu_);
    evict(Clock::now());
    auto it = by_id_.find(id);
    if (it == by_id_.end()) return std::nullopt;
    return it->second->r;
}

bool ResponseStore::erase(const std::string& id) {
    std::lock_guard lock(mu_);
    auto it = by_id_.find(id);
    if (it == by_id_.end()) return false;
    bytes_ -= it->second->bytes;
    order_.erase(it->second);
    by_id_.erase(it);
    return true;
}

int64_t ResponseStore::size() {
    std::lock_guard lock(mu_);
    evict(Clock::now());
    return int64_t(order_.size());
}

}   // namespace kimi::server
