// Code rows in files: always plain rows, one after another, whatever layout a cache holds them in
// (rows in quads interleave four rows, row_packing.hpp), so that a file is the same bytes on every machine.
#pragma once
#include <cstddef>

#include "io/checked_file.hpp"
#include "kvsketch/codec.hpp"

namespace kvsketch {

// Writes rows [0, codes.size()) of `codes` (held as `codec` holds them) as plain rows.
void write_code_rows(BinaryWriter& out, const VectorCodec& codec, const CodeBuffer& codes);

// Reads `rows` plain rows into `codes` (emptied first) as `codec` holds them; `what` names them in
// errors of a short file.
void read_code_rows(BinaryReader& in, const VectorCodec& codec, size_t rows, CodeBuffer& codes, const char* what);

}  // namespace kvsketch
