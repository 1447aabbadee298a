// SequenceDriver implementation (see sequence_driver.h).
#include "runtime/sequence_driver.h"

#include <algorithm>
#include <cstring>

#include "core/rng.h"

namespace kimi {

namespace {

struct Seq {
    std::vector<int32_t> tokens;
    int64_t done = 0;
    int64_t max_chunk = 0;   // fillers: random chunk sizes up to this
};

int64_t next_chunk(const Seq& s, bool scored, const DriveOptions& opt, Rng& rng) {
    const int64_t left = int64_t(s.tokens.size()) - s.done;
    if (left <= 0) return 0;
    if (!scored) return std::min<int64_t>(left, 1 + int64_t(rng.below(uint64_t(s.max_chunk))));
    if (opt.decode_from >= 0 && s.done >= opt.decode_from) return 1;
    int64_t n = left;
    if (opt.decode_from >= 0) n = std::min(n, opt.decode_from - s.done);
    if (opt.prefill_chunk > 0) n = std::min(n, opt.prefill_chunk);
    return n;
}

}   // namespace

std::vector<float> score_sequence(const KimiModel& model, Exec& ex, const std::vector<int32_t>& tokens,
                                  const DriveOptions& opt, const InputRows& input_rows) {
    const ModelConfig& c = model.config();
    Rng rng(opt.filler_seed);
    std::vector<Seq> seqs(static_cast<size_t>(1 + opt.n_fillers));
    seqs[0].tokens = tokens;
    for (size_t i = 1; i < seqs.size(); ++i) {
        const int64_t len = 1 + int64_t(rng.below(uint64_t(tokens.size()) + 24));
        for (int64_t j = 0; j < len; ++j) seqs[i].tokens.push_back(int32_t(rng.below(uint64_t(c.vocab_size))));
        seqs[i].max_chunk = 1 + int64_t(rng.below(12));
    }

    const int32_t block_size = 16;
    int32_t max_blocks = 1;
    for (const auto& s : seqs)
        max_blocks = std::max<int32_t>(max_blocks, int32_t((s.tokens.size() + block_size - 1) / block_size));
    const int32_t n_blocks = max_blocks * int32_t(seqs.size());
    std::vector<int32_t> pool(static_cast<size_t>(n_blocks));
    for (int32_t i = 0; i < n_blocks; ++i) pool[size_t(i)] = i;
    for (int32_t i = n_blocks - 1; i > 0; --i) std::swap(pool[size_t(i)], pool[rng.below(uint64_t(i) + 1)]);
    std::vector<int32_t> block_tables(pool);   // sequence b owns pool[b*max_blocks, (b+1)*max_blocks)

    CacheStorage cache(model.cache_geometry(int32_t(seqs.size()), n_blocks, block_size));
    std::vector<float> out(tokens.size() * size_t(c.vocab_size));
    const int64_t d = c.hidden_size;
    std::vector<int32_t> ids, starts, past, slots, rows, tables, embed_rows;
    std::vector<float> embed_values;
    while (seqs[0].done < int64_t(tokens.size()) ||
           std::any_of(seqs.begin(), seqs.end(), [](const Seq& s) { return s.done < int64_t(s.tokens.size()); })) {
        ids.clear();
        starts.assign(1, 0);
        past.clear();
        slots.clear();
        rows.clear();
        tables.clear();
        embed_rows.clear();
        embed_values.clear();
        std::vector<std::pair<size_t, int64_t>> fed;   // (sequence, n) in batch order
        // Order the sequences differently each step so the scored one is not always first.
        const size_t first = size_t(rng.below(seqs.size()));
        for (size_t k = 0; k < seqs.size(); ++k) {
            const size_t b = (first + k) % seqs.size();
            const int64_t n = next_chunk(seqs[b], b == 0, opt, rng);
            if (n == 0) continue;
            if (b == 0) {
                for (int64_t j = 0; j < n; ++j) rows.push_back(int32_t(ids.size() + size_t(j)));
                for (size_t k = 0; k < input_rows.positions.size(); ++k) {   // given rows fed in this chunk
                    const int64_t pos = input_rows.positions[k];
                    if (pos < seqs[0].done || pos >= seqs[0].done + n) continue;
                    embed_rows.push_back(int32_t(int64_t(ids.size()) + pos - seqs[0].done));
                    embed_values.insert(embed_values.end(), input_rows.values.begin() + int64_t(k) * d,
                                        input_rows.values.begin() + int64_t(k + 1) * d);
                }
            }
            for (int64_t j = 0; j < n; ++j) ids.push_back(seqs[b].tokens[size_t(seqs[b].done + j)]);
            starts.push_back(int32_t(ids.size()));
            past.push_back(int32_t(seqs[b].done));
            slots.push_back(int32_t(b));
            tables.insert(tables.end(), block_tables.begin() + int64_t(b) * max_blocks,
                          block_tables.begin() + int64_t(b + 1) * max_blocks);
            fed.push_back({b, n});
        }
        ForwardBatch batch{ids, starts, past, slots, tables, max_blocks, rows, {}, embed_rows, embed_values};
        ex.arena->reset();
        const Tensor logits = model.forward(ex, batch, cache);
        if (!rows.empty())
            std::memcpy(out.data() + size_t(seqs[0].done) * size_t(c.vocab_size), logits.data, logits.nbytes());
        for (auto [b, n] : fed) seqs[b].done += n;
    }
    return out;
}

}   // namespace kimi
