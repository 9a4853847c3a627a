#include "common/identifier.h"

#include <regex>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace hypertune {
namespace {

TEST(IdentifierTest, ToIdentifierKeepsNamesAndMendsTheRest) {
  EXPECT_EQ(ToIdentifier("learning_rate"), "learning_rate");
  EXPECT_EQ(ToIdentifier("layer.0-units"), "layer.0-units");
  EXPECT_EQ(ToIdentifier("my key/α"), "my_key___");
  EXPECT_EQ(ToIdentifier("1st"), "_1st");
  EXPECT_EQ(ToIdentifier(""), "_");
  EXPECT_EQ(ToIdentifier(std::string(300, 'a')).size(), kMaxNameBytes);
}

TEST(IdentifierTest, ThePatternSaysWhatTheFunctionsSay) {
  const std::regex pattern(kIdentifierPattern, std::regex::ECMAScript);
  for (const std::string& text : std::vector<std::string>{
           "lr", "_x", "a.b-c_9", "9a", "", "a b", "-a", ".a", "ä",
           std::string(128, 'a'), std::string(129, 'a')}) {
    const bool by_functions = !text.empty() && text.size() <= kMaxNameBytes &&
                              IsIdentifierStart(text.front()) &&
                              text.find_first_not_of(
                                  "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQR"
                                  "STUVWXYZ0123456789_.-") == std::string::npos;
    EXPECT_EQ(std::regex_match(text, pattern), by_functions) << text;
    bool chars = !text.empty();
    for (char c : text) chars = chars && IsIdentifierChar(c);
    EXPECT_EQ(by_functions, chars && text.size() <= kMaxNameBytes &&
                                IsIdentifierStart(text.front()))
        << text;
    EXPECT_TRUE(std::regex_match(ToIdentifier(text), pattern)) << text;
  }
}

}  // namespace
}  // namespace hypertune
