// Certificates for TLS tests, made with the openssl command-line tool: a CA
// for servers, a server certificate for 127.0.0.1, a CA for clients, a
// client certificate it signed, and a "stranger" client certificate signed
// by the servers' CA (so refused where client certificates must come from
// the clients' CA).
//
// Thread safety: one thread at a time.
#ifndef HYPERTUNE_TESTING_TEST_CERTS_H_
#define HYPERTUNE_TESTING_TEST_CERTS_H_

#include <string>

namespace hypertune::test {

// Whether the openssl tool is installed (tests skip, visibly, without it).
bool HaveOpenssl();

class TestPki {
 public:
  // Files go to the existing directory `dir`.
  explicit TestPki(std::string dir) : dir_(std::move(dir)) {}

  // Makes the CAs and certificates "ca", "server", "client-ca", "client"
  // and "stranger"; false (with openssl's log) on failure.
  bool Make(std::string* log);
  // The PEM certificate and key of `name`.
  std::string Pem(const std::string& name) const;
  std::string Key(const std::string& name) const;

 private:
  bool Openssl(const std::string& args) const;
  bool MakeCa(const std::string& name) const;
  bool MakeCert(const std::string& name, const std::string& ca,
                const std::string& ext);
  std::string File(const std::string& name) const;

  std::string dir_;
  int serial_ = 0;
};

}  // namespace hypertune::test

#endif  // HYPERTUNE_TESTING_TEST_CERTS_H_
