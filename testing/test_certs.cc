#include "testing/test_certs.h"

#include <cstdlib>
#include <fstream>
#include <iterator>

#include "absl/strings/str_cat.h"

namespace hypertune::test {
namespace {

std::string NewKey(const std::string& name) {
  return absl::StrCat(
      "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ", name,
      ".key");
}

}  // namespace

bool HaveOpenssl() {
  return std::system("openssl version >/dev/null 2>&1") == 0;
}

std::string TestPki::File(const std::string& name) const {
  return absl::StrCat(dir_, "/", name);
}

std::string TestPki::Pem(const std::string& name) const {
  return File(name + ".pem");
}

std::string TestPki::Key(const std::string& name) const {
  return File(name + ".key");
}

bool TestPki::Make(std::string* log) {
  std::ofstream(File("server.ext"))
      << "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n";
  std::ofstream(File("client.ext")) << "extendedKeyUsage=clientAuth\n";
  const bool made = MakeCa("ca") && MakeCa("client-ca") &&
                    MakeCert("server", "ca", "server.ext") &&
                    MakeCert("client", "client-ca", "client.ext") &&
                    MakeCert("stranger", "ca", "client.ext");
  if (!made) {
    std::ifstream file(File("openssl.log"));
    *log = std::string(std::istreambuf_iterator<char>(file), {});
  }
  return made;
}

bool TestPki::Openssl(const std::string& args) const {
  const std::string command =
      absl::StrCat("cd '", dir_, "' && openssl ", args, " >>openssl.log 2>&1");
  return std::system(command.c_str()) == 0;
}

bool TestPki::MakeCa(const std::string& name) const {
  return Openssl(absl::StrCat("req -x509 ", NewKey(name), " -out ", name,
                              ".pem -days 2 -subj /CN=hypertune-test-", name));
}

bool TestPki::MakeCert(const std::string& name, const std::string& ca,
                       const std::string& ext) {
  return Openssl(absl::StrCat("req ", NewKey(name), " -out ", name,
                              ".csr -subj /CN=", name)) &&
         Openssl(absl::StrCat("x509 -req -in ", name, ".csr -CA ", ca,
                              ".pem -CAkey ", ca, ".key -set_serial ",
                              ++serial_, " -days 2 -out ", name,
                              ".pem -extfile ", ext));
}

}  // namespace hypertune::test
