// WeightStore over a GGUF model: every tensor llama.cpp's converter wrote, seen under the name
// and in the form the Hugging Face checkpoint has, so the loader binds both the same way. Which
// GGUF tensor holds which Hugging Face tensor, and how the converter changed it, comes from the
// tensor layout's rows (GgufSource, gguf_names.h); here each change is undone exactly:
//   - kSame: a plain view (GGUF's ggml dimension order reversed is the PyTorch shape);
//   - kStackedExpert: one [out, in] view per expert of the per-layer stack [E, out, in];
//   - kSqueezedConv: [1, H·K, 1, W] (or a squeeze of it) → [H·K, 1, W] (the same bytes);
//   - kSplitKvB: k_b (transposed per head) and v_b → kv_b_proj [H·(n+v), r] rebuilt (a copy:
//     bf16 when both parts are bf16, else the exact f32 values);
//   - kFusedAttnRes: the fused score (norm · proj, in f32) → norm = the fused vector, proj =
//     ones (the loader multiplies them back: an exact product);
//   - kFoldedALog: -exp(A_log) kept as it is (a_log_folded() says so), flattened to a vector.
// A GGUF tensor no row names is kept under its own name, and finish() reports it as unexpected.
// ref: docs/gguf.md#tensors; llama.cpp conversion/kimi_linear.py, kimi_k3.py (modify_tensors).
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "checkpoint/weight_store.h"
#include "core/error.h"

#include <sys/stat.h>

namespace kimi {

// k_b: [H, r, n] (k part, transposed per head), v_b: [H, v, r] → kv_b_proj [H·(n + v), r].
Tensor WeightStore::join_kv_b(const Tensor& k_b, const Tensor& v_b, const std::string& where) {
    if (k_b.rank != 3 || v_b.rank != 3 || k_b.dim(0) != v_b.dim(0) || k_b.dim(1) != v_b.dim(2))
        throw Error(where + "attn_k_b " + shape_str(k_b) + " and attn_v_b " + shape_str(v_b) +
                    " do not split one kv_b_proj ([H, r, n] and [H, v, r])");
    const int64_t h = k_b.dim(0), r = k_b.dim(1), n = k_b.dim(2), v = v_b.dim(1), rows = n + v;
    const bool bf16 = k_b.dtype == DType::kBF16 && v_b.dtype == DType::kBF16;
    Tensor out = new_like(bf16 ? DType::kBF16 : DType::kF32, {h * rows, r});
    std::vector<float> kf, vf;
    if (!bf16) {   // exact values of any type
        kf.resize(size_t(k_b.numel()));
        vf.resize(size_t(v_b.numel()));
        decode_f32(k_b, kf.data());
        decode_f32(v_b, vf.data());
    }
    const auto put = [&](int64_t row, int64_t col, const Tensor& src, const std::vector<float>& f, int64_t e) {
        const int64_t o = row * r + col;
        if (bf16)
            static_cast<uint16_t*>(out.data)[o] = static_cast<const uint16_t*>(src.data)[e];
        else
            out.f32()[o] = f[size_t(e)];
    };
    for (int64_t hh = 0; hh < h; ++hh)
        for (int64_t j = 0; j < r; ++j) {
            for (int64_t i = 0; i < n; ++i) put(hh * rows + i, j, k_b, kf, (hh * r + j) * n + i);
            for (int64_t i = 0; i < v; ++i) put(hh * rows + n + i, j, v_b, vf, (hh * v + i) * r + j);
        }
    return out;
}

namespace {
// One kSame / kSqueezedConv / kFoldedALog / kStackedExpert / kFusedAttnRes row from its GGUF
// tensor t (already a view); `n_rows`: how many rows read this GGUF tensor.
Tensor undo(const GgufSource& src, const Tensor& t, size_t n_rows, const std::string& where) {
    const auto bad = [&](const char* expected) {
        return Error(where + "shape " + shape_str(t) + ", expected " + expected);
    };
    switch (src.form) {
        case GgufForm::kFoldedALog:   // one value per head, in whatever rank was written
            return t.view({t.numel()});
        case GgufForm::kSqueezedConv: {   // as the converter wrote it, or squeezed as llama-quantize rewrites it
            int64_t non_unit = 0;
            for (int i = 0; i + 1 < t.rank; ++i) non_unit += t.dim(i) != 1;
            if (t.rank < 2 || non_unit > 1) throw bad("[1, H*K, 1, W]");
            return t.view({t.numel() / t.dim(-1), 1, t.dim(-1)});
        }
        case GgufForm::kStackedExpert:
            if (t.rank != 3 || t.dim(0) != int64_t(n_rows)) throw bad("[E, out, in], E the config's experts");
            return t.rows(src.index, src.index + 1).view({t.dim(1), t.dim(2)});
        case GgufForm::kFusedAttnRes:
            if (t.rank != 1) throw bad("[D] (a fused AttnRes score)");
            return t;   // the norm; the projection (ones) is made by the caller
        default: return t;
    }
}
}   // namespace

void WeightStore::load_gguf(const std::string& path, WeightMemory memory,
                            const std::function<void(uint64_t, uint64_t)>& on_read,
                            const std::vector<GgufSource>& sources) {
    uint64_t total = 0;
    for (const auto& p : gguf_split_paths(path)) {
        check_regular_file(p);
        struct stat st {};
        if (::stat(p.c_str(), &st) == 0) total += uint64_t(st.st_size);
    }
    file_memory_ = resolve_file_memory(memory, total, memory_available_bytes(), huge_pages_available());
    gguf_ = std::make_unique<GgufModel>(path, file_memory_, on_read);
    a_log_folded_ = true;
    std::map<std::string, std::vector<const GgufSource*>> by_gguf;   // GGUF name → the rows it holds
    for (const GgufSource& s : sources)
        if (s.form != GgufForm::kSplitKvB) by_gguf[s.gguf].push_back(&s);
    const auto add = [&](const std::string& hf, const Tensor& t, const std::string* file) {
        if (tensors_.count(hf)) throw Error(*file + ": two GGUF tensors map to '" + hf + "'");
        tensors_[hf] = Entry{t, file};
    };
    for (const auto& [name, entry] : gguf_->tensors()) {
        const std::string* file = &entry.part->path();
        const std::string where = *file + ": tensor '" + name + "': ";
        Tensor t;
        try {
            t = entry.info->tensor();
        } catch (const Error& e) {
            throw Error(*file + ": " + e.what());
        }
        const auto it = by_gguf.find(name);
        if (it == by_gguf.end()) {
            tensors_[name] = Entry{t, file};   // k_b / v_b (joined below), or unknown: finish() reports it
            continue;
        }
        for (const GgufSource* src : it->second) {
            if (src->form == GgufForm::kFusedAttnRes && src->index == 1) {   // the projection: ones [1, D]
                Tensor ones = new_f32({1, t.numel()});
                for (int64_t i = 0; i < t.numel(); ++i) ones.f32()[i] = 1.0f;
                add(src->hf, ones, file);
            } else {
                add(src->hf, undo(*src, t, it->second.size(), where), file);
            }
        }
    }
    join_kv_b_halves(sources);
}

// Each MLA layer's kv_b_proj from its k_b / v_b halves (kept under their GGUF names until here).
void WeightStore::join_kv_b_halves(const std::vector<GgufSource>& sources) {
    for (const GgufSource& s : sources) {
        if (s.form != GgufForm::kSplitKvB) continue;
        const auto k = tensors_.find(s.gguf), v = tensors_.find(s.gguf_v);
        if (k == tensors_.end() && v == tensors_.end()) continue;   // absent: the loader says which tensor is missing
        const std::string* file = (k != tensors_.end() ? k : v)->second.path;
        if (k == tensors_.end() || v == tensors_.end())
            throw Error(*file + ": has " + (k != tensors_.end() ? s.gguf : s.gguf_v) + " but not " +
                        (k != tensors_.end() ? s.gguf_v : s.gguf) + " (MLA's kv_b_proj needs both)");
        const Tensor joined = join_kv_b(k->second.tensor, v->second.tensor, *file + ": " + s.gguf + ": ");
        tensors_.erase(k);
        tensors_.erase(v);
        if (tensors_.count(s.hf)) throw Error(*file + ": two GGUF tensors map to '" + s.hf + "'");
        tensors_[s.hf] = Entry{joined, file};
    }
}

}   // namespace kimi
