// TextStream: the text side of one request's output — the streaming detokenizer plus stop
// strings. Pieces only ever end at UTF-8 character boundaries; while stop strings are set,
// the last (longest stop − 1) bytes are held back, so text that turns out to begin a stop
// string is never shown. A stop string may span any number of tokens; when one completes,
// the text ends just before it (the stop string is excluded, as in vLLM's
// include_stop_str_in_output=false). ref: vLLM v1 detokenizer.py (check_stop_strings).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace kimi {

class TextStream {
public:
    // stops: non-empty strings (checked by the engine). skip_special: special tokens add no
    // text (vLLM's skip_special_tokens=True, the default).
    // include_stop: keep the matched stop string at the end (vLLM include_stop_str_in_output).
    // keep_special: ids whose text is kept even when skipping specials (a chat format's markers).
    TextStream(const tok::Tokenizer& tok, const std::vector<std::string>& stops, bool skip_special,
               bool include_stop = false, const std::vector<int32_t>& keep_special = {});

    // Appends to `out` the text that became final with token `id`. Returns true when a stop
    // string completed: `out` then ends just before it and the stream is over.
    bool push(int32_t id, std::string& out);
    // Appends whatever was held back (the request ended for another reason).
    void finish(std::string& out);

    int32_t stop_index() const { return stop_index_; }   // which stop string matched, or -1

private:
    const tok::Tokenizer* tok_;
    std::vector<std::string> stops_;
    tok::Tokenizer::StreamDecoder dec_;
    std::string pending_;   // decoded, not yet emitted
    size_t hold_ = 0;       // longest stop − 1
    bool skip_special_;
    std::vector<int32_t> keep_special_;
    bool include_stop_;
    bool done_ = false;
    int32_t stop_index_ = -1;
};

}   // namespace kimi
