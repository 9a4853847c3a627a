// ResolveBackupPath: Backup writes only inside the backup directory and
// never over what an earlier backup did not write.
#include "service/rpc/backup_path.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/test_server.h"

namespace hypertune::service {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

void Write(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

class BackupPathTest : public ::testing::Test {
 protected:
  BackupPathTest() : root_(fs::canonical(dir_.path()) / "backups") {
    fs::create_directory(root_);
  }
  std::string In(const std::string& name) const {
    return (root_ / name).string();
  }

  test::TempDir dir_;
  const fs::path root_;
};

TEST_F(BackupPathTest, ANewFileInsideIsItsAbsolutePath) {
  auto relative = ResolveBackupPath(root_.string(), "copy.db", false);
  ASSERT_TRUE(relative.ok()) << relative.status();
  EXPECT_EQ(*relative, In("copy.db"));
  fs::create_directory(root_ / "daily");
  auto nested = ResolveBackupPath(root_.string(), In("daily/a.db"), false);
  ASSERT_TRUE(nested.ok()) << nested.status();
  EXPECT_EQ(*nested, In("daily/a.db"));
}

TEST_F(BackupPathTest, AFolderWhoseNameBeginsWithTwoDotsIsInside) {
  fs::create_directory(root_ / "..hidden");
  auto inside = ResolveBackupPath(root_.string(), "..hidden/x.db", false);
  ASSERT_TRUE(inside.ok()) << inside.status();
  EXPECT_EQ(*inside, In("..hidden/x.db"));
}

TEST_F(BackupPathTest, ALongNameOrANulByteIsInvalidArgument) {
  for (const std::string& bad :
       {std::string(300, 'a'), std::string("x\0y.db", 6),
        std::string(5000, 'b')}) {
    auto refused = ResolveBackupPath(root_.string(), bad, false);
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument)
        << refused.status();
    EXPECT_THAT(std::string(refused.status().message()),
                HasSubstr("destination_path"));
  }
}

TEST_F(BackupPathTest, APathOutsideTheDirectoryIsRefused) {
  for (const std::string& outside :
       {std::string("/dev/null"), dir_.File("live.db"), In("../escape.db"),
        std::string("/etc/passwd")}) {
    auto resolved = ResolveBackupPath(root_.string(), outside, true);
    EXPECT_EQ(resolved.status().code(), absl::StatusCode::kInvalidArgument)
        << outside;
    EXPECT_THAT(std::string(resolved.status().message()),
                HasSubstr("outside the backup directory"))
        << outside;
  }
  // A link inside that points out is followed, and so refused.
  fs::create_directory_symlink(dir_.path(), root_ / "out");
  auto linked = ResolveBackupPath(root_.string(), "out/x.db", false);
  EXPECT_EQ(linked.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(BackupPathTest, ADirectoryALinkAndADeviceAreNotFiles) {
  fs::create_directory(root_ / "folder");
  auto folder = ResolveBackupPath(root_.string(), "folder", true);
  EXPECT_EQ(folder.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(folder.status().message()), HasSubstr("directory"));

  Write(In("real.db"), "SQLite format 3");
  fs::create_symlink(root_ / "real.db", root_ / "link.db");
  auto link = ResolveBackupPath(root_.string(), "link.db", true);
  EXPECT_EQ(link.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(link.status().message()), HasSubstr("symbolic link"));

  ASSERT_EQ(mkfifo(In("fifo").c_str(), 0600), 0);
  auto fifo = ResolveBackupPath(root_.string(), "fifo", true);
  EXPECT_EQ(fifo.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(fifo.status().message()), HasSubstr("regular file"));
}

TEST_F(BackupPathTest, AnExistingFileNeedsOverwriteAndMustBeABackup) {
  Write(In("notes.txt"), "not a database\n");
  auto refused = ResolveBackupPath(root_.string(), "notes.txt", false);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("overwrite"));
  auto foreign = ResolveBackupPath(root_.string(), "notes.txt", true);
  EXPECT_EQ(foreign.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(foreign.status().message()),
              HasSubstr("not an SQLite database"));

  Write(In("old.db"), std::string("SQLite format 3\0rest", 20));
  EXPECT_EQ(ResolveBackupPath(root_.string(), "old.db", false).status().code(),
            absl::StatusCode::kAlreadyExists);
  auto replaced = ResolveBackupPath(root_.string(), "old.db", true);
  ASSERT_TRUE(replaced.ok()) << replaced.status();
  EXPECT_EQ(*replaced, In("old.db"));
}

TEST_F(BackupPathTest, NoDirectoryOrNoFolderIsAClearError) {
  EXPECT_EQ(ResolveBackupPath("", "copy.db", false).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ResolveBackupPath(In("missing"), "copy.db", false).status().code(),
            absl::StatusCode::kFailedPrecondition);
  auto folder = ResolveBackupPath(root_.string(), "no/such/copy.db", false);
  EXPECT_EQ(folder.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(folder.status().message()),
              HasSubstr("destination_path"));
  EXPECT_EQ(ResolveBackupPath(root_.string(), "", false).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hypertune::service
