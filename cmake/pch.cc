// The one source of the targets that build the precompiled headers
// (precompiled_headers.cmake): the headers are compiled for it.
