// GGUF container reader (format: llama.cpp ggml/src/gguf.cpp, gguf-py/gguf/gguf_reader.py).
// parse_gguf walks the file image with a bounds-checked cursor: every length, count, offset
// and size is checked against the bytes left before anything is allocated or read, so a
// corrupt file is a one-line kimi::Error naming the file and the key or tensor.
// Caps (documented limits, beyond "fits in the file"):
//   key: 1..64 KiB bytes; string value: at most 1 GiB (ggml's GGUF_MAX_STRING_LENGTH);
//   array: at most 2^30 elements (ggml's GGUF_MAX_ARRAY_ELEMENTS), count × element size (8 per
//   string at least) within the bytes left; no arrays of arrays;
//   kv / tensor counts: at most the bytes left / their smallest record (14 / 33 bytes);
//   tensor name: 1..63 bytes (ggml's GGML_MAX_NAME 64 with its NUL); 1..4 dims, each ≥ 0 (ggml
//   allows empty tensors), the element count < 2^63, ne[0] a whole number of blocks;
//   general.alignment: u32, a nonzero power of two (default 32); tensor offsets multiples of it,
//   inside the data section, not overlapping (any order: ggml's own writer packs them in order).
#include "checkpoint/gguf_file.h"

#include <sys/stat.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>

#include "core/error.h"

namespace kimi {

static_assert(std::endian::native == std::endian::little, "the GGUF reader assumes a little-endian host");

namespace {

constexpr uint64_t kMaxKeyBytes = 64 << 10;
constexpr uint64_t kMaxStringBytes = uint64_t(1) << 30;
constexpr uint64_t kMaxArrayElems = uint64_t(1) << 30;
constexpr uint64_t kMaxNameBytes = 63;
constexpr uint64_t kMinKvBytes = 8 + 1 + 4 + 1;               // key length, 1 key byte, type, a u8
constexpr uint64_t kMinTensorBytes = 8 + 1 + 4 + 8 + 4 + 8;   // name, n_dims, one ne, type, offset
constexpr uint64_t kDefaultAlignment = 32;

// ggml's types by id (ggml.h; block geometry from gguf-py's GGML_QUANT_SIZES). name nullptr:
// an id ggml does not define (removed types).
struct GgmlType {
    const char* name;
    BlockShape block;
    bool readable;   // kimi.cpp has a DType for it
    DType dtype;
};
constexpr GgmlType kGgmlTypes[] = {
    {"F32", {1, 4}, true, DType::kF32},
    {"F16", {1, 2}, true, DType::kF16},
    {"Q4_0", {32, 18}, true, DType::kQ4_0},
    {"Q4_1", {32, 20}, true, DType::kQ4_1},
    {nullptr, {0, 0}, false, DType::kF32},   // 4: Q4_2, removed
    {nullptr, {0, 0}, false, DType::kF32},   // 5: Q4_3, removed
    {"Q5_0", {32, 22}, true, DType::kQ5_0},
    {"Q5_1", {32, 24}, true, DType::kQ5_1},
    {"Q8_0", {32, 34}, true, DType::kQ8_0},
    {"Q8_1", {32, 36}, false, DType::kF32},
    {"Q2_K", {256, 84}, true, DType::kQ2_K},
    {"Q3_K", {256, 110}, true, DType::kQ3_K},
    {"Q4_K", {256, 144}, true, DType::kQ4_K},
    {"Q5_K", {256, 176}, true, DType::kQ5_K},
    {"Q6_K", {256, 210}, true, DType::kQ6_K},
    {"Q8_K", {256, 292}, false, DType::kF32},
    {"IQ2_XXS", {256, 66}, true, DType::kIQ2_XXS},
    {"IQ2_XS", {256, 74}, true, DType::kIQ2_XS},
    {"IQ3_XXS", {256, 98}, true, DType::kIQ3_XXS},
    {"IQ1_S", {256, 50}, true, DType::kIQ1_S},
    {"IQ4_NL", {32, 18}, true, DType::kIQ4_NL},
    {"IQ3_S", {256, 110}, true, DType::kIQ3_S},
    {"IQ2_S", {256, 82}, true, DType::kIQ2_S},
    {"IQ4_XS", {256, 136}, true, DType::kIQ4_XS},
    {"I8", {1, 1}, false, DType::kF32},
    {"I16", {1, 2}, false, DType::kF32},
    {"I32", {1, 4}, false, DType::kF32},
    {"I64", {1, 8}, false, DType::kF32},
    {"F64", {1, 8}, false, DType::kF32},
    {"IQ1_M", {256, 56}, true, DType::kIQ1_M},
    {"BF16", {1, 2}, true, DType::kBF16},
    {nullptr, {0, 0}, false, DType::kF32},   // 31-33: Q4_0_4_4, Q4_0_4_8, Q4_0_8_8, removed
    {nullptr, {0, 0}, false, DType::kF32},
    {nullptr, {0, 0}, false, DType::kF32},
    {"TQ1_0", {256, 54}, true, DType::kTQ1_0},
    {"TQ2_0", {256, 66}, true, DType::kTQ2_0},
    {nullptr, {0, 0}, false, DType::kF32},   // 36-38: IQ4_NL_4_4, IQ4_NL_4_8, IQ4_NL_8_8, removed
    {nullptr, {0, 0}, false, DType::kF32},
    {nullptr, {0, 0}, false, DType::kF32},
    {"MXFP4", {32, 17}, true, DType::kMXFP4_GGML},
    {"NVFP4", {64, 36}, false, DType::kF32},
    {"Q1_0", {128, 18}, false, DType::kF32},
    {"Q2_0", {64, 18}, false, DType::kF32},
};
constexpr uint32_t kNumGgmlTypes = sizeof(kGgmlTypes) / sizeof(kGgmlTypes[0]);

const GgmlType* ggml_type_info(uint32_t id) {
    return id < kNumGgmlTypes && kGgmlTypes[id].name ? &kGgmlTypes[id] : nullptr;
}

// Bytes of one element of a numeric metadata type; 0 for string, array and unknown ids.
uint64_t value_size(uint32_t t) {
    switch (GgufType(t)) {
        case GgufType::kU8:
        case GgufType::kI8:
        case GgufType::kBool: return 1;
        case GgufType::kU16:
        case GgufType::kI16: return 2;
        case GgufType::kU32:
        case GgufType::kI32:
        case GgufType::kF32: return 4;
        case GgufType::kU64:
        case GgufType::kI64:
        case GgufType::kF64: return 8;
        default: return 0;
    }
}

bool is_integer(GgufType t) {
    return t == GgufType::kU8 || t == GgufType::kI8 || t == GgufType::kU16 || t == GgufType::kI16 ||
        t == GgufType::kU32 || t == GgufType::kI32 || t == GgufType::kU64 || t == GgufType::kI64;
}

bool is_signed(GgufType t) {
    return t == GgufType::kI8 || t == GgufType::kI16 || t == GgufType::kI32 || t == GgufType::kI64;
}

template <typename T>
T load(const unsigned char* p) {
    T v;
    std::memcpy(&v, p, sizeof(T));
    return v;
}

// A numeric value of type t at p (little-endian), as the GgufValue fields hold it.
void load_scalar(GgufType t, const unsigned char* p, GgufValue& v) {
    switch (t) {
        case GgufType::kU8: v.u = load<uint8_t>(p); break;
        case GgufType::kI8: v.i = load<int8_t>(p); break;
        case GgufType::kU16: v.u = load<uint16_t>(p); break;
        case GgufType::kI16: v.i = load<int16_t>(p); break;
        case GgufType::kU32: v.u = load<uint32_t>(p); break;
        case GgufType::kI32: v.i = load<int32_t>(p); break;
        case GgufType::kU64: v.u = load<uint64_t>(p); break;
        case GgufType::kI64: v.i = load<int64_t>(p); break;
        case GgufType::kF32: v.f = double(load<float>(p)); break;
        case GgufType::kF64: v.f = load<double>(p); break;
        case GgufType::kBool: v.u = load<uint8_t>(p) != 0; break;   // ggml: any nonzero byte is true
        default: break;
    }
}

std::string type_str(const GgufValue& v) {
    return v.type == GgufType::kArray ? std::string("an array of ") + gguf_type_name(v.elem)
                                      : std::string(gguf_type_name(v.type));
}

// A key or tensor name as error messages show it: quoted, control bytes as '?' (one line), at
// most 100 bytes.
std::string quoted(const std::string& s) {
    std::string q = "'";
    for (size_t i = 0; i < s.size() && i < 100; ++i) q += (uint8_t(s[i]) < 0x20 || s[i] == 0x7f) ? '?' : s[i];
    return q + (s.size() > 100 ? "...'" : "'");
}

// A bounds-checked cursor over the file image.
class Cursor {
public:
    Cursor(const unsigned char* data, size_t size, const std::string& path) : d_(data), size_(size), path_(path) {}

    uint64_t pos() const { return pos_; }
    uint64_t left() const { return size_ - pos_; }
    const std::string& path() const { return path_; }
    [[noreturn]] void fail(const std::string& msg) const { throw Error(path_ + ": " + msg); }

    // n bytes for `what`, or a "truncated" error naming it.
    const unsigned char* take(uint64_t n, const std::string& what) {
        if (n > left())
            fail("truncated (" + what + " at byte " + std::to_string(pos_) + " needs " + std::to_string(n) +
                 " bytes, " + std::to_string(left()) + " left)");
        const unsigned char* p = d_ + pos_;
        pos_ += n;
        return p;
    }
    uint32_t u32(const std::string& what) { return load<uint32_t>(take(4, what)); }
    uint64_t u64(const std::string& what) { return load<uint64_t>(take(8, what)); }
    int64_t i64(const std::string& what) { return load<int64_t>(take(8, what)); }

    // A GGUF string (u64 length, bytes) of at most max_len bytes.
    std::string str(uint64_t max_len, const std::string& what) {
        const uint64_t n = u64(what + " length");
        if (n > max_len)
            fail(what + ": length " + std::to_string(n) + " exceeds the limit of " + std::to_string(max_len));
        const unsigned char* p = take(n, what);
        return std::string(reinterpret_cast<const char*>(p), size_t(n));
    }

private:
    const unsigned char* d_;
    uint64_t size_;
    uint64_t pos_ = 0;
    const std::string& path_;
};

GgufValue read_value(Cursor& c, const std::string& key) {
    const std::string where = "key " + quoted(key);
    GgufValue v;
    const uint32_t t = c.u32(where + " type");
    if (t > uint32_t(GgufType::kF64)) c.fail(where + ": unknown value type " + std::to_string(t));
    v.type = GgufType(t);
    if (v.type == GgufType::kString) {
        v.s = c.str(kMaxStringBytes, where);
    } else if (v.type != GgufType::kArray) {
        load_scalar(v.type, c.take(value_size(t), where), v);
    } else {
        const uint32_t e = c.u32(where + " element type");
        if (e == uint32_t(GgufType::kArray)) c.fail(where + ": nested arrays are not supported");
        if (e > uint32_t(GgufType::kF64)) c.fail(where + ": unknown array element type " + std::to_string(e));
        v.elem = GgufType(e);
        v.count = c.u64(where + " array length");
        const uint64_t elem_min = v.elem == GgufType::kString ? 8 : value_size(e);
        if (v.count > kMaxArrayElems || v.count > c.left() / elem_min)
            c.fail(where + ": array of " + std::to_string(v.count) + " " + gguf_type_name(v.elem) +
                   " runs past the end of the file (" + std::to_string(c.left()) + " bytes left)");
        if (v.elem == GgufType::kString) {
            v.strings.reserve(size_t(v.count));
            for (uint64_t j = 0; j < v.count; ++j)
                v.strings.push_back(c.str(kMaxStringBytes, where + " element " + std::to_string(j)));
        } else {
            v.raw = c.take(v.count * elem_min, where);
        }
    }
    return v;
}

GgufTensorInfo read_tensor_info(Cursor& c, uint64_t index) {
    GgufTensorInfo t;
    t.name = c.str(std::numeric_limits<uint64_t>::max(), "tensor " + std::to_string(index) + " name");
    if (t.name.empty()) c.fail("tensor " + std::to_string(index) + ": empty name");
    if (t.name.size() > kMaxNameBytes)
        c.fail("tensor " + std::to_string(index) + ": name of " + std::to_string(t.name.size()) +
               " bytes exceeds ggml's limit of " + std::to_string(kMaxNameBytes));
    const std::string where = "tensor " + quoted(t.name);
    const uint32_t n_dims = c.u32(where + " n_dims");
    if (n_dims < 1 || n_dims > 4) c.fail(where + ": " + std::to_string(n_dims) + " dimensions (1..4 accepted)");
    // The product of the nonzero dims must fit too (an empty tensor may not hide an overflow): then
    // every partial product does, in whatever order a Tensor multiplies its shape.
    int64_t numel = 1, nonzero = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
        const int64_t n = c.i64(where + " ne[" + std::to_string(d) + "]");
        if (n < 0) c.fail(where + ": ne[" + std::to_string(d) + "] = " + std::to_string(n) + " is negative");
        t.ne.push_back(n);
        if (n > 0 && __builtin_mul_overflow(nonzero, n, &nonzero)) c.fail(where + ": element count overflows int64");
        numel = n == 0 ? 0 : numel * n;   // ≤ nonzero: no overflow
    }
    t.ggml_type = c.u32(where + " type");
    const GgmlType* g = ggml_type_info(t.ggml_type);
    if (!g) c.fail(where + ": " + ggml_type_name(t.ggml_type) + " is not a ggml type");
    if (t.ne[0] % g->block.elems != 0)
        c.fail(where + ": ne[0] = " + std::to_string(t.ne[0]) + " is not a multiple of the " + g->name + " block (" +
               std::to_string(g->block.elems) + ")");
    const uint64_t blocks = uint64_t(numel / g->block.elems);
    if (blocks > std::numeric_limits<uint64_t>::max() / uint64_t(g->block.bytes))
        c.fail(where + ": size in bytes overflows");
    t.nbytes = blocks * uint64_t(g->block.bytes);
    t.supported = g->readable;
    t.dtype = g->dtype;
    t.offset = c.u64(where + " offset");
    return t;
}

}   // namespace

const char* gguf_type_name(GgufType t) {
    static const char* const kNames[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                         "bool", "string", "array", "u64", "i64", "f64"};
    return uint32_t(t) < 13 ? kNames[uint32_t(t)] : "unknown";
}

std::string ggml_type_name(uint32_t ggml_type) {
    const GgmlType* g = ggml_type_info(ggml_type);
    return g ? std::string(g->name) : "type " + std::to_string(ggml_type);
}

bool ggml_type_block(uint32_t ggml_type, BlockShape& out) {
    const GgmlType* g = ggml_type_info(ggml_type);
    if (g) out = g->block;
    return g != nullptr;
}

bool ggml_type_dtype(uint32_t ggml_type, DType& out) {
    const GgmlType* g = ggml_type_info(ggml_type);
    if (!g || !g->readable) return false;
    out = g->dtype;
    return true;
}

Tensor GgufTensorInfo::tensor() const {
    if (!supported)
        throw Error("tensor " + quoted(name) + ": type " + ggml_type_name(ggml_type) + " is not supported by kimi.cpp");
    Tensor t;
    t.data = const_cast<unsigned char*>(data);
    t.dtype = dtype;
    t.rank = int(ne.size());
    for (size_t d = 0; d < ne.size(); ++d) t.shape[d] = ne[ne.size() - 1 - d];
    return t;
}

GgufContents parse_gguf(const unsigned char* data, size_t size, const std::string& path) {
    Cursor c(data, size, path);
    GgufContents out;
    const unsigned char* magic = c.take(4, "magic");
    if (std::memcmp(magic, "GGUF", 4) != 0) {
        std::string m;
        for (int k = 0; k < 4; ++k) m += (magic[k] >= 0x20 && magic[k] < 0x7f) ? char(magic[k]) : '?';
        c.fail("not a GGUF file (magic '" + m + "', expected 'GGUF')");
    }
    out.version = c.u32("version");
    if (out.version == 1) c.fail("GGUF v1 is not supported");
    if (out.version != 0 && (out.version & 0xffffu) == 0)
        c.fail("big-endian GGUF is not supported (version field " + std::to_string(out.version) + ")");
    if (out.version != 2 && out.version != 3)
        c.fail("GGUF version " + std::to_string(out.version) + " is not supported (2 and 3 are)");
    const uint64_t n_tensors = c.u64("tensor count");
    const uint64_t n_kv = c.u64("kv count");
    if (n_tensors > c.left() / kMinTensorBytes)
        c.fail("tensor count " + std::to_string(n_tensors) + " does not fit in the file (" + std::to_string(c.left()) +
               " bytes left)");
    if (n_kv > c.left() / kMinKvBytes)
        c.fail("kv count " + std::to_string(n_kv) + " does not fit in the file (" + std::to_string(c.left()) +
               " bytes left)");

    for (uint64_t k = 0; k < n_kv; ++k) {
        std::string key = c.str(kMaxKeyBytes, "key " + std::to_string(k));
        if (key.empty()) c.fail("key " + std::to_string(k) + " is empty");
        if (out.metadata.count(key)) c.fail("duplicate key " + quoted(key));
        GgufValue v = read_value(c, key);
        out.metadata.emplace(std::move(key), std::move(v));
    }
    if (auto it = out.metadata.find("general.alignment"); it != out.metadata.end()) {
        if (it->second.type != GgufType::kU32)
            c.fail("key 'general.alignment' is " + type_str(it->second) + ", expected u32");
        if (it->second.u == 0 || (it->second.u & (it->second.u - 1)) != 0)
            c.fail("general.alignment " + std::to_string(it->second.u) + " is not a nonzero power of two");
        out.alignment = it->second.u;
    } else {
        out.alignment = kDefaultAlignment;
    }

    std::set<std::string> names;
    out.tensors.reserve(size_t(n_tensors));
    for (uint64_t k = 0; k < n_tensors; ++k) {
        GgufTensorInfo t = read_tensor_info(c, k);
        if (!names.insert(t.name).second) c.fail("duplicate tensor " + quoted(t.name));
        out.tensors.push_back(std::move(t));
    }

    // The data section starts at the next multiple of the alignment (ggml pads only when there
    // are tensors: a file without them may end right after its metadata).
    const uint64_t end = c.pos();
    const uint64_t padded = end + (out.alignment - end % out.alignment) % out.alignment;
    if (padded > size && !out.tensors.empty())
        c.fail("truncated (the data section starts at byte " + std::to_string(padded) + ", past the end at " +
               std::to_string(size) + ")");
    out.data_offset = std::min<uint64_t>(padded, size);
    const uint64_t data_size = size - out.data_offset;

    std::vector<std::pair<uint64_t, uint64_t>> ranges;
    for (auto& t : out.tensors) {
        const std::string where = "tensor " + quoted(t.name);
        if (t.offset % out.alignment != 0)
            c.fail(where + ": offset " + std::to_string(t.offset) + " is not a multiple of the alignment " +
                   std::to_string(out.alignment));
        if (t.offset > data_size || t.nbytes > data_size - t.offset)
            c.fail(where + ": data [" + std::to_string(t.offset) + ", +" + std::to_string(t.nbytes) +
                   ") runs past the data section (" + std::to_string(data_size) + " bytes; file truncated?)");
        t.data = data + out.data_offset + t.offset;
        if (t.nbytes) ranges.push_back({t.offset, t.offset + t.nbytes});
    }
    std::sort(ranges.begin(), ranges.end());
    for (size_t k = 1; k < ranges.size(); ++k)
        if (ranges[k].first < ranges[k - 1].second)
            c.fail("tensor data ranges overlap (at data byte " + std::to_string(ranges[k].first) + ")");
    return out;
}

// --- GgufFile ---

GgufFile::GgufFile(const std::string& path, FileMemory mode, const std::function<void(uint64_t)>& on_read)
    : file_(std::make_unique<MappedFile>(path, mode, on_read)) {
    c_ = parse_gguf(file_->data(), file_->size(), path);
}

const GgufValue* GgufFile::find(const std::string& key) const {
    auto it = c_.metadata.find(key);
    return it == c_.metadata.end() ? nullptr : &it->second;
}

namespace {

const GgufValue& need(const GgufFile& f, const std::string& key) {
    const GgufValue* v = f.find(key);
    if (!v) throw Error(f.path() + ": key " + quoted(key) + " is missing");
    return *v;
}

[[noreturn]] void wrong_type(const GgufFile& f, const std::string& key, const GgufValue& v, const char* expected) {
    throw Error(f.path() + ": key " + quoted(key) + " is " + type_str(v) + ", expected " + expected);
}

// An integer value (of any integer type) as int64; false when it does not fit.
bool to_int64(GgufType t, const GgufValue& v, int64_t& out) {
    if (is_signed(t)) {
        out = v.i;
        return true;
    }
    if (v.u > uint64_t(std::numeric_limits<int64_t>::max())) return false;
    out = int64_t(v.u);
    return true;
}

}   // namespace

int64_t GgufFile::get_int(const std::string& key) const {
    const GgufValue& v = need(*this, key);
    if (!is_integer(v.type)) wrong_type(*this, key, v, "an integer");
    int64_t out = 0;
    if (!to_int64(v.type, v, out))
        throw Error(path() + ": key " + quoted(key) + " = " + std::to_string(v.u) + " overflows int64");
    return out;
}

double GgufFile::get_float(const std::string& key) const {
    const GgufValue& v = need(*this, key);
    if (v.type != GgufType::kF32 && v.type != GgufType::kF64) wrong_type(*this, key, v, "f32 or f64");
    return v.f;
}

bool GgufFile::get_bool(const std::string& key) const {
    const GgufValue& v = need(*this, key);
    if (v.type != GgufType::kBool) wrong_type(*this, key, v, "bool");
    return v.u != 0;
}

const std::string& GgufFile::get_string(const std::string& key) const {
    const GgufValue& v = need(*this, key);
    if (v.type != GgufType::kString) wrong_type(*this, key, v, "string");
    return v.s;
}

std::vector<int64_t> GgufFile::get_int_array(const std::string& key) const {
    const GgufValue& v = need(*this, key);
    if (v.type != GgufType::kArray || !is_integer(v.elem)) wrong_type(*this, key, v, "an integer array");
    const uint64_t step = value_size(uint32_t(v.elem));
    std::vector<int64_t> out(size_t(v.count));
    for (uint64_t j = 0; j < v.count; ++j) {
        GgufValue e;
        load_scalar(v.elem, v.raw + j * step, e);
        if (!to_int64(v.elem, e, out[size_t(j)]))
            throw Error(path() + ": key " + quoted(key) + " element " + std::to_string(j) + " = " +
                        std::to_string(e.u) + " overflows int64");
    }
    return out;
}

std::vector<double> GgufFile::get_float_array(const std::string& key) const {
    const GgufValue& v = need(*this, key);
    if (v.type != GgufType::kArray || (v.elem != GgufType::kF32 && v.elem != GgufType::kF64))
        wrong_type(*this, key, v, "an f32 or f64 array");
    const uint64_t step = value_size(uint32_t(v.elem));
    std::vector<double> out(size_t(v.count));
    for (uint64_t j = 0; j < v.count; ++j) {
        GgufValue e;
        load_scalar(v.elem, v.raw + j * step, e);
        out[size_t(j)] = e.f;
    }
    return out;
}

const std::vector<std::string>& GgufFile::get_string_array(const std::string& key) const {
    const GgufValue& v = need(*this, key);
    if (v.type != GgufType::kArray || v.elem != GgufType::kString) wrong_type(*this, key, v, "a string array");
    return v.strings;
}

// --- split models ---

std::vector<std::string> gguf_split_paths(const std::string& first) {
    // PREFIX-%05d-of-%05d.gguf, as llama.cpp's llama_split_path writes (split.count is a u16).
    static const std::string kTail = "-00000-of-00000.gguf";
    if (first.size() <= kTail.size()) return {first};
    const std::string tail = first.substr(first.size() - kTail.size());
    const std::string prefix = first.substr(0, first.size() - kTail.size());
    for (size_t k = 0; k < kTail.size(); ++k) {
        const bool digit = kTail[k] == '0';
        if (digit ? (tail[k] < '0' || tail[k] > '9') : tail[k] != kTail[k]) return {first};
    }
    const int no = std::stoi(tail.substr(1, 5)), count = std::stoi(tail.substr(10, 5));
    if (no < 1 || count < 1 || no > count) return {first};
    auto name = [&](int k) {
        char buf[32];
        std::snprintf(buf, sizeof(buf), "-%05d-of-%05d.gguf", k, count);
        return prefix + buf;
    };
    if (no != 1)
        throw Error(first + ": part " + std::to_string(no) + " of a split model; pass the first part, " + name(1));
    std::vector<std::string> out;
    for (int k = 1; k <= count; ++k) out.push_back(name(k));
    return out;
}

GgufModel::GgufModel(const std::string& path, FileMemory mode, const std::function<void(uint64_t, uint64_t)>& on_read) {
    const std::vector<std::string> paths = gguf_split_paths(path);
    uint64_t total = 0, done = 0;
    for (size_t k = 0; k < paths.size(); ++k) {
        struct stat st {};
        const bool found = ::stat(paths[k].c_str(), &st) == 0;
        if (!found && paths.size() > 1)
            throw Error(paths[k] + ": part " + std::to_string(k + 1) + " of " + std::to_string(paths.size()) +
                        " of the split model is missing");
        check_regular_file(paths[k]);   // missing, a directory, a pipe: an error naming the file
        total += uint64_t(st.st_size);
    }
    const auto on_bytes = [&](uint64_t n) {
        done += n;
        if (on_read) on_read(done, total);
    };
    for (const auto& p : paths) parts_.push_back(std::make_unique<GgufFile>(p, mode, on_bytes));

    const uint64_t n = parts_.size();
    const GgufFile& head = first();
    // split.count in every part that has it (required when split), split.no = the 0-based index
    for (uint64_t k = 0; k < n; ++k) {
        const GgufFile& part = *parts_[k];
        if (part.has("split.count") || n > 1) {
            if (!part.has("split.count"))
                throw Error(part.path() + ": named as part " + std::to_string(k + 1) + " of " + std::to_string(n) +
                            " but has no split.count");
            const int64_t count = part.get_int("split.count");
            if (count != int64_t(n)) {
                char first_name[80] = "";
                if (n == 1 && count > 1 && count <= 99999)
                    std::snprintf(first_name, sizeof(first_name), "; pass the first part, PREFIX-00001-of-%05d.gguf",
                                  int(count));
                throw Error(part.path() + ": split.count is " + std::to_string(count) + " but " + std::to_string(n) +
                            " part(s) were found" + first_name);
            }
        }
        if (part.has("split.no") || n > 1) {
            const int64_t no = part.get_int("split.no");   // missing: "key 'split.no' is missing"
            if (no != int64_t(k))
                throw Error(part.path() + ": split.no is " + std::to_string(no) + ", expected " + std::to_string(k) +
                            " (0-based index of this part)");
        }
    }
    for (const auto& part : parts_)
        for (const auto& t : part->tensors()) {
            auto [it, fresh] = tensors_.emplace(t.name, Entry{&t, part.get()});
            if (!fresh)
                throw Error(part->path() + ": tensor " + quoted(t.name) + " also appears in " +
                            it->second.part->path());
        }
    if (head.has("split.tensors.count") || n > 1) {
        const int64_t expected = head.get_int("split.tensors.count");
        if (expected != int64_t(tensors_.size()))
            throw Error(head.path() + ": split.tensors.count is " + std::to_string(expected) + " but " +
                        std::to_string(tensors_.size()) + " tensors were found in " + std::to_string(n) + " part(s)");
    }
}

uint64_t GgufModel::total_bytes() const {
    uint64_t s = 0;
    for (const auto& p : parts_) s += p->size();
    return s;
}

bool is_gguf_path(const std::string& path) {
    struct stat st {};
    const bool exists = ::stat(path.c_str(), &st) == 0;
    if (exists && S_ISDIR(st.st_mode)) return false;
    if (path.size() >= 5 && path.compare(path.size() - 5, 5, ".gguf") == 0) return true;
    if (!exists || !S_ISREG(st.st_mode)) return false;   // never opens a pipe or a device
    std::ifstream f(path, std::ios::binary);
    char magic[4] = {};
    return f.read(magic, 4) && std::memcmp(magic, "GGUF", 4) == 0;
}

}   // namespace kimi
