// .npy reader. The header is a Python dict literal; it is parsed strictly (the format's own
// grammar: the three keys once each, a quoted descr, True/False, a tuple of integers), so that a
// big-endian or otherwise unexpected dtype is refused rather than matched by a substring.
#include <charconv>
#include <cstring>
#include <set>
#include <string_view>

#include "datasets/shape_product.hpp"
#include "core/require.hpp"
#include "kvsketch/half.hpp"
#include "kvsketch/eval/datasets.hpp"

namespace kvsketch {
namespace {

struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  std::vector<uint64_t> shape;
};

// A cursor over the header text; every failure names the file and what was expected where.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& path) : text_(text), path_(path) {}

  NpyHeader parse() {
    NpyHeader header;
    std::set<std::string> keys;
    expect('{');
    while (!peek('}')) {
      const std::string key = quoted();
      require(keys.insert(key).second, "'{}': npy header gives '{}' twice", path_, key);
      expect(':');
      if (key == "descr") {
        header.descr = quoted();
      } else if (key == "fortran_order") {
        header.fortran_order = boolean();
      } else if (key == "shape") {
        header.shape = tuple();
      } else {
        fail(fmt::format("an unknown key '{}'", key));
      }
      if (!peek(',')) break;
      expect(',');
    }
    expect('}');
    skip_space();
    require(at_ == text_.size(), "'{}': npy header has '{}' after its dict", path_, text_.substr(at_));
    require(keys.size() == 3, "'{}': npy header needs 'descr', 'fortran_order' and 'shape'", path_);
    return header;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(fmt::format("'{}': malformed npy header: {} at offset {} of '{}'", path_, what, at_, text_));
  }
  void skip_space() {
    while (at_ < text_.size() && (text_[at_] == ' ' || text_[at_] == '\n' || text_[at_] == '\t')) ++at_;
  }
  bool peek(char c) {
    skip_space();
    return at_ < text_.size() && text_[at_] == c;
  }
  void expect(char c) {
    if (!peek(c)) fail(fmt::format("expected '{}'", c));
    ++at_;
  }
  std::string quoted() {
    skip_space();
    if (at_ >= text_.size() || (text_[at_] != '\'' && text_[at_] != '"')) fail("expected a quoted string");
    const char quote = text_[at_++];
    const size_t end = text_.find(quote, at_);
    if (end == std::string_view::npos) fail("an unterminated string");
    const std::string value(text_.substr(at_, end - at_));
    at_ = end + 1;
    return value;
  }
  bool boolean() {
    skip_space();
    for (const auto& [word, value] : {std::pair{std::string_view("True"), true}, {std::string_view("False"), false}})
      if (text_.substr(at_).starts_with(word)) {
        at_ += word.size();
        return value;
      }
    fail("expected True or False");
  }
  std::vector<uint64_t> tuple() {
    std::vector<uint64_t> dims;
    expect('(');
    while (!peek(')')) {
      uint64_t dim = 0;
      const auto [stop, error] = std::from_chars(text_.data() + at_, text_.data() + text_.size(), dim);
      if (error != std::errc() || stop == text_.data() + at_) {
        const std::string_view entry = text_.substr(at_, text_.find_first_of(",)", at_) - at_);
        fail(fmt::format("shape entry '{}' is not a non-negative integer", entry));
      }
      at_ = static_cast<size_t>(stop - text_.data());
      dims.push_back(dim);
      if (!peek(',')) break;
      expect(',');
    }
    expect(')');
    return dims;
  }

  std::string_view text_;
  const std::string& path_;
  size_t at_ = 0;
};

}  // namespace

Matrix read_npy(const std::string& path) {
  const std::string bytes = read_file_bytes(path);
  require(bytes.size() >= 10 && bytes.compare(0, 6, "\x93NUMPY") == 0, "'{}': not a .npy file (bad magic)", path);
  const int major = static_cast<unsigned char>(bytes[6]), minor = static_cast<unsigned char>(bytes[7]);
  require((major == 1 || major == 2 || major == 3) && minor == 0,
          "'{}': npy format version {}.{}; this reader takes 1.0, 2.0 and 3.0", path, major, minor);
  size_t header_length, header_start;
  if (major == 1) {
    header_length = static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
    header_start = 10;
  } else {
    require(bytes.size() >= 12, "'{}': truncated header", path);
    uint32_t length;
    std::memcpy(&length, bytes.data() + 8, 4);
    header_length = length;
    header_start = 12;
  }
  require(header_length <= bytes.size() - header_start, "'{}': truncated header", path);
  const NpyHeader header = HeaderParser(std::string_view(bytes).substr(header_start, header_length), path).parse();
  size_t element = 0;
  if (header.descr == "<f4") element = 4;
  if (header.descr == "<f8") element = 8;
  if (header.descr == "<f2") element = 2;
  require(element != 0, "'{}': dtype '{}'; expected little-endian float16, float32 or float64 ('<f2', '<f4', '<f8')",
          path, header.descr);
  require(!header.fortran_order, "'{}': Fortran-ordered arrays are not supported", path);
  require(header.shape.size() == 1 || header.shape.size() == 2, "'{}': expected a 1-D or 2-D array, got {} dimensions",
          path, header.shape.size());
  const size_t count = shape_product(path, header.shape, element);
  Matrix m;
  m.rows = header.shape.size() == 2 ? header.shape[0] : 1;
  m.cols = header.shape.back();
  const size_t data_start = header_start + header_length;
  require(bytes.size() - data_start >= count * element, "'{}': truncated data: {} bytes, expected {}", path,
          bytes.size() - data_start, count * element);
  require(bytes.size() - data_start == count * element, "'{}': {} bytes after the array's {}", path,
          bytes.size() - data_start - count * element, count * element);
  m.values.resize(count);
  const char* data = bytes.data() + data_start;
  for (size_t i = 0; i < count; ++i) {
    if (element == 4) {
      std::memcpy(&m.values[i], data + 4 * i, 4);
    } else if (element == 8) {
      double value;
      std::memcpy(&value, data + 8 * i, 8);
      m.values[i] = static_cast<float>(value);
    } else {
      uint16_t half;
      std::memcpy(&half, data + 2 * i, 2);
      m.values[i] = half_to_float(half);
    }
  }
  return m;
}

}  // namespace kvsketch
