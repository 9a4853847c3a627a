#include "trainer_sdk/trainer/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace hypertune::train {
namespace {

constexpr char kMagic[8] = {'H', 'T', 'C', 'K', 'P', 'T', '\0', '\0'};
constexpr uint32_t kVersion = 1;

uint64_t Fnv1a(const char* data, size_t size) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < size; ++i) {
    h ^= uint8_t(data[i]);
    h *= 0x100000001b3ull;
  }
  return h;
}

template <typename T>
void Put(std::string& out, T value) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  out.append(bytes, sizeof(T));
}

void PutArray(std::string& out, const std::vector<float>& values) {
  Put<uint64_t>(out, values.size());
  out.append(reinterpret_cast<const char*>(values.data()),
             values.size() * sizeof(float));
}

class Reader {
 public:
  Reader(const std::string& bytes, size_t end) : bytes_(bytes), end_(end) {}
  template <typename T>
  bool Get(T& value) {
    if (end_ - pos_ < sizeof(T)) return false;
    std::memcpy(&value, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  bool GetArray(std::vector<float>& values) {
    uint64_t count = 0;
    if (!Get(count) || (end_ - pos_) / sizeof(float) < count) return false;
    values.resize(count);
    std::memcpy(values.data(), bytes_.data() + pos_, count * sizeof(float));
    pos_ += count * sizeof(float);
    return true;
  }
  bool GetString(std::string& value, uint32_t length) {
    if (end_ - pos_ < length) return false;
    value.assign(bytes_.data() + pos_, length);
    pos_ += length;
    return true;
  }
  size_t pos() const { return pos_; }

 private:
  const std::string& bytes_;
  size_t end_;
  size_t pos_ = 0;
};

std::string Errno(const std::string& what, const std::string& path) {
  return what + " " + path + ": " + std::strerror(errno);
}

}  // namespace

void CaptureModel(const Model& model, Checkpoint& checkpoint) {
  checkpoint.config = model.config();
  checkpoint.parameters = model.Read(ModelArray::kParameters);
  checkpoint.velocity = model.Read(ModelArray::kVelocity);
  checkpoint.running_stats = model.Read(ModelArray::kRunningStats);
}

std::string RestoreModel(const Checkpoint& checkpoint, Model& model) {
  if (!(checkpoint.config == model.config())) {
    return "checkpoint: model configuration differs from the run's";
  }
  if (checkpoint.parameters.size() != model.Size(ModelArray::kParameters) ||
      checkpoint.velocity.size() != model.Size(ModelArray::kVelocity) ||
      checkpoint.running_stats.size() !=
          model.Size(ModelArray::kRunningStats)) {
    return "checkpoint: array sizes do not match the model";
  }
  model.Write(ModelArray::kParameters, checkpoint.parameters);
  model.Write(ModelArray::kVelocity, checkpoint.velocity);
  model.Write(ModelArray::kRunningStats, checkpoint.running_stats);
  return "";
}

std::string EncodeCheckpoint(const Checkpoint& c) {
  std::string out(kMagic, sizeof(kMagic));
  Put<uint32_t>(out, kVersion);
  const ModelConfig& m = c.config;
  for (int32_t v : {m.in_channels, m.in_height, m.in_width, m.num_classes,
                    m.width, m.depth, m.stages, int(m.imagenet_stem)}) {
    Put<int32_t>(out, v);
  }
  Put<int64_t>(out, c.epoch);
  Put<int64_t>(out, c.step);
  Put<uint64_t>(out, c.seed);
  PutArray(out, c.parameters);
  PutArray(out, c.velocity);
  PutArray(out, c.running_stats);
  Put<uint32_t>(out, uint32_t(c.metadata.size()));
  for (const auto& [name, value] : c.metadata) {
    Put<uint32_t>(out, uint32_t(name.size()));
    out.append(name);
    Put<double>(out, value);
  }
  Put<uint64_t>(out, Fnv1a(out.data(), out.size()));
  return out;
}

std::string DecodeCheckpoint(const std::string& bytes, Checkpoint& c) {
  if (bytes.size() < sizeof(kMagic) + 4 + 8 ||
      std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) {
    return "not a checkpoint (bad magic)";
  }
  const size_t body = bytes.size() - 8;
  uint64_t stored = 0;
  std::memcpy(&stored, bytes.data() + body, 8);
  if (stored != Fnv1a(bytes.data(), body))
    return "checksum mismatch (corrupt or truncated)";
  Reader r(bytes, body);
  char magic[8];
  for (char& ch : magic) r.Get(ch);
  uint32_t version = 0;
  r.Get(version);
  if (version != kVersion)
    return "unsupported version " + std::to_string(version);
  int32_t f[8];
  for (int32_t& v : f) {
    if (!r.Get(v)) return "truncated config";
  }
  c.config = ModelConfig{f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7] != 0};
  if (!r.Get(c.epoch) || !r.Get(c.step) || !r.Get(c.seed))
    return "truncated counters";
  if (!r.GetArray(c.parameters) || !r.GetArray(c.velocity) ||
      !r.GetArray(c.running_stats)) {
    return "truncated arrays";
  }
  uint32_t entries = 0;
  if (!r.Get(entries)) return "truncated metadata";
  c.metadata.clear();
  for (uint32_t i = 0; i < entries; ++i) {
    uint32_t length = 0;
    std::string name;
    double value = 0;
    if (!r.Get(length) || !r.GetString(name, length) || !r.Get(value)) {
      return "truncated metadata";
    }
    c.metadata[name] = value;
  }
  if (r.pos() != body) return "trailing bytes before the checksum";
  return "";
}

std::string WriteCheckpoint(const std::string& path,
                            const Checkpoint& checkpoint) {
  const std::string bytes = EncodeCheckpoint(checkpoint);
  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("opening", tmp);
  size_t written = 0;
  while (written < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      std::string e = Errno("writing", tmp);
      ::close(fd);
      return e;
    }
    written += size_t(n);
  }
  if (::fsync(fd) != 0) {
    std::string e = Errno("fsync", tmp);
    ::close(fd);
    return e;
  }
  if (::close(fd) != 0) return Errno("closing", tmp);
  if (::rename(tmp.c_str(), path.c_str()) != 0)
    return Errno("renaming over", path);
  // Make the rename itself durable.
  const size_t slash = path.find_last_of('/');
  const std::string dir =
      slash == std::string::npos ? "." : path.substr(0, slash == 0 ? 1 : slash);
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return "";
}

std::string ReadCheckpoint(const std::string& path, Checkpoint& checkpoint) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Errno("opening", path);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  std::string problem = DecodeCheckpoint(buffer.str(), checkpoint);
  if (!problem.empty()) return path + ": " + problem;
  return "";
}

}  // namespace hypertune::train
