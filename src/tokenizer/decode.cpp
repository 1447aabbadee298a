// Decoding: token ids -> bytes (tiktoken decode_bytes: concatenation of the token bytes, the
// UTF-8 text for special ids), the lossy variant (HF wrapper: errors="replace"), and the
// streaming detokenizer that holds back an incomplete UTF-8 sequence at the end.
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode.h"

namespace kimi::tok {

std::string Tokenizer::decode(std::span<const int32_t> ids) const {
    std::string out;
    for (int32_t id : ids) out.append(impl_->bytes_of(id));
    return out;
}

std::string Tokenizer::decode_lossy(std::span<const int32_t> ids) const {
    std::string out;
    utf8_append_lossy(out, decode(ids));
    return out;
}

Tokenizer::StreamDecoder::StreamDecoder(const Tokenizer& tok) : impl_(tok.impl_) {}

std::string Tokenizer::StreamDecoder::push(int32_t id) {
    std::string out;
    push(id, out);
    return out;
}

void Tokenizer::StreamDecoder::push(int32_t id, std::string& out) {
    pending_.append(impl_->bytes_of(id));
    // Hold back a trailing sequence that is a valid-but-incomplete UTF-8 prefix (at most 3 bytes).
    size_t hold = 0;
    for (size_t back = 1; back <= 3 && back <= pending_.size(); ++back) {
        if (utf8_incomplete_len(pending_, pending_.size() - back) == back) {
            hold = back;
            break;
        }
    }
    utf8_append_lossy(out, std::string_view(pending_).substr(0, pending_.size() - hold));
    pending_.erase(0, pending_.size() - hold);
}

std::string Tokenizer::StreamDecoder::flush() {
    std::string out;
    flush(out);
    return out;
}

void Tokenizer::StreamDecoder::flush(std::string& out) {
    utf8_append_lossy(out, pending_);
    pending_.clear();
}

}   // namespace kimi::tok
