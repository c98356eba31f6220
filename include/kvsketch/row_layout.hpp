// RowLayout: what one encoded row of a codec holds, as its fused decode-attention kernels read it.
// Data only (byte offsets, bit widths, tables), the same for every row, so that a kernel written
// elsewhere (a GPU's, an engine's) can read the rows without the codec; the library's own kernels
// read rows through it too. VectorCodec::row_layout() gives a codec's.
//
// A row is parts of b-bit indices (b = 1..4, packed LSB-first as bitpack.hpp packs them), each
// index standing for table[index], optionally times a float the row carries (a norm or a scale).
//   As keys, with q a query in the keys' domain (key_domain floats: the query rotated, sketched,
//   as the codec prepares it), a row's score is the sum over key groups of
//     group factor * sum over the group's parts of scale * factor * <q[domain, domain + count), table[indices]>,
//   the groups added in order (plus the query's shift where key_shift: centred keys' <q, mean>).
//   As values, weight w adds w * factor * table[indices] to the accumulator (accumulator floats) at
//   [domain, domain + count) for each part, and w to each slot in weight_sums; the codec turns the
//   accumulator back into the output (a rotation undone, a mean added).
#pragma once
#include <cstddef>
#include <optional>
#include <vector>

// The library is built with hidden visibility: what this header declares is its exported API.
#pragma GCC visibility push(default)
namespace kvsketch {

struct RowLayout {
  // `count` b-bit indices from byte `offset` of the row (of a plain row; see quads).
  struct Indices {
    size_t offset = 0, count = 0;
    int bits = 0;
    std::vector<float> table;  // 2^bits values
  };
  // A float the row carries at byte `offset`: fp16 or fp32.
  struct Factor {
    size_t offset = 0;
    bool half = true;
  };
  struct Part {
    Indices indices;
    std::optional<Factor> factor;
    size_t domain = 0;   // keys: its first coordinate of the query; values: of the accumulator
    float scale = 1.0f;  // keys: its scores' scale
  };
  // Key parts [first, first + count) whose scores add up, then times the row's `factor` where there
  // is one (TurboQuant prod's norm over its scalar and sign parts).
  struct KeyGroup {
    size_t first = 0, count = 0;
    std::optional<Factor> factor;
  };
  // A piece of the row as rows in quads cut it: `bytes` from `offset`, in chunks of `chunk`.
  struct Field {
    size_t offset = 0, bytes = 0, chunk = 0;
  };

  size_t row_bytes = 0;  // bytes from one row to the next

  bool has_keys = false;  // whether the parts below describe the row as keys
  size_t key_domain = 0;
  std::vector<Part> key_parts;
  std::vector<KeyGroup> key_groups;
  bool key_shift = false;

  bool has_values = false;  // whether the parts below describe the row as values
  size_t accumulator = 0;
  std::vector<Part> value_parts;
  std::vector<size_t> weight_sums;

  // The row's fields, covering it once: b-bit indices in chunks of b bytes (8 indices), a factor
  // as one chunk, anything else as one field of one chunk.
  std::vector<Field> fields;
  // Whether the rows lie in quads: four rows interleaved, chunk k of field f of row r at
  // 4 * f.offset + (4k + r) * f.chunk from the start of their quad (a last, shorter chunk of t
  // bytes at 4 * f.offset + 4 * f.chunk * k + r * t). A cache packs its blocks so where its CPU's
  // kernel reads them in place.
  bool quads = false;
};

}  // namespace kvsketch
#pragma GCC visibility pop
