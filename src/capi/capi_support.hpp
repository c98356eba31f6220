// What every C entry point shares: the handles behind the opaque types, a registry of live ones
// (so that a freed or forged handle is refused rather than read), the thread-local last error,
// and the guard that turns every exception into a status.
#pragma once
#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <unordered_set>
#include <utility>
#include <vector>

#include "kvsketch/ann.hpp"
#include "kvsketch/calibration.hpp"
#include "kvsketch/codec.hpp"
#include "kvsketch/error.hpp"
#include "kvsketch/ivf_index.hpp"
#include "kvsketch/kvsketch.h"
#include "kvsketch/paged_cache.hpp"
#include "kvsketch/paged_selection_cache.hpp"
#include "kvsketch/selection_cache.hpp"

struct kvs_codec {
  std::unique_ptr<kvsketch::VectorCodec> codec;
};
struct kvs_calibration {
  kvsketch::Calibration calibration;
};
struct kvs_cache {
  kvsketch::PagedKVCache cache;
};
struct kvs_selection_cache {
  kvsketch::SelectionCache cache;
};
struct kvs_paged_selection {
  kvsketch::PagedSelectionCache cache;
};
struct kvs_index {
  kvsketch::FlatIndex index;
};
struct kvs_ivf_index {
  kvsketch::IvfIndex index;
};

namespace kvsketch::capi {

// A bad argument at the boundary: KVS_ERROR_ARGUMENT (the library's own Error is KVS_ERROR_REFUSED).
class ArgumentError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

void set_last_error(const char* message);

// The live handles of one type.
template <typename T>
class Registry {
 public:
  static T* adopt(std::unique_ptr<T> handle) {
    std::lock_guard lock(mutex());
    live().insert(handle.get());
    return handle.release();
  }
  // Removes and frees a live handle; false when it is not one.
  static bool release(T* handle) {
    {
      std::lock_guard lock(mutex());
      if (live().erase(handle) == 0) return false;
    }
    delete handle;
    return true;
  }
  static bool contains(const T* handle) {
    std::lock_guard lock(mutex());
    return live().count(handle) != 0;
  }

 private:
  static std::mutex& mutex() {
    static std::mutex m;
    return m;
  }
  static std::unordered_set<const T*>& live() {
    static std::unordered_set<const T*> handles;
    return handles;
  }
};

// The handle, checked: not NULL and live.
template <typename T>
T& handle(T* pointer, const char* name) {
  if (!pointer) throw ArgumentError(std::string(name) + " is NULL");
  if (!Registry<std::remove_const_t<T>>::contains(pointer))
    throw ArgumentError(std::string(name) + " is not a live handle (freed, or never made by kvs_*_create/load)");
  return *pointer;
}

inline void require_pointer(const void* pointer, const char* name) {
  if (!pointer) throw ArgumentError(std::string(name) + " is NULL");
}

inline void require_argument(bool condition, const std::string& message) {
  if (!condition) throw ArgumentError(message);
}

// a * b, refused where it overflows size_t (a count of elements or bytes from the caller).
inline size_t product(size_t a, size_t b, const char* what) {
  if (b != 0 && a > std::numeric_limits<size_t>::max() / b) throw ArgumentError(std::string(what) + " overflows size_t");
  return a * b;
}

// A parameter struct as the caller gave it: its first `size` bytes over the defaults.
template <typename Params>
Params read_params(const Params* given, Params defaults, const char* name) {
  if (!given) return defaults;
  require_argument(given->size >= sizeof(size_t) && given->size <= (size_t{1} << 16),
                   std::string(name) + "->size is " + std::to_string(given->size) + "; fill it with kvs_*_default_params()");
  std::memcpy(&defaults, given, std::min(given->size, sizeof(Params)));
  defaults.size = sizeof(Params);
  return defaults;
}

// count values of dtype at `data` as floats: the pointer for fp32, else widened into `storage`.
const float* as_floats(kvs_dtype dtype, const void* data, size_t count, std::vector<float>& storage);

// Runs body; the status of what it threw, with its message as the thread's last error.
template <typename Body>
kvs_status guarded(Body&& body) noexcept {
  try {
    body();
    set_last_error("");
    return KVS_OK;
  } catch (const ArgumentError& error) {
    set_last_error(error.what());
    return KVS_ERROR_ARGUMENT;
  } catch (const kvsketch::Error& error) {
    set_last_error(error.what());
    return KVS_ERROR_REFUSED;
  } catch (const std::bad_alloc&) {
    set_last_error("out of memory");
    return KVS_ERROR_MEMORY;
  } catch (const std::exception& error) {
    set_last_error(error.what());
    return KVS_ERROR_INTERNAL;
  } catch (...) {
    set_last_error("an unknown exception");
    return KVS_ERROR_INTERNAL;
  }
}

// *out = a new live handle around load(path): every kvs_*_load (a failed load leaves *out NULL).
template <typename Handle, typename Load>
kvs_status load_handle(const char* path, Handle** out, const char* name, Load&& load) {
  return guarded([&] {
    require_pointer(path, "path");
    require_pointer(out, name);
    *out = nullptr;
    *out = Registry<Handle>::adopt(std::unique_ptr<Handle>(new Handle{load(path)}));
  });
}

}  // namespace kvsketch::capi
