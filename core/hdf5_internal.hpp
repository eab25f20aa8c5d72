// What the HDF5 wrapper's source files share: reporting a failure, making and opening objects by
// path.
#pragma once

#include <string>

#include "core/hdf5_file.hpp"

namespace strata::h5 {

// Throws DataError "path: object: problem".
[[noreturn]] void fail(const std::string& path, const std::string& object,
                       const std::string& problem);
// For failures of an HDF5 call: adds HDF5's own explanation. Call it right after the failure.
[[noreturn]] void fail_hdf5(const std::string& path, const std::string& object,
                            const std::string& problem);

// A link creation list that makes the missing groups of a path, as mkdir -p does.
Handle link_creation_list(const File& file, const std::string& object);

// A group or dataset of `file`, open; DataError when it is missing or cannot be opened.
Handle open_object(const File& file, const std::string& name);

}  // namespace strata::h5
