// The pickle reader against pickles CPython 3.11's own pickler wrote (the hex strings below, with
// the expression each came from), and the refusals a hostile pickle must get.
#include "src/io/pickle_reader.hpp"

#include <catch2/catch.hpp>

#include <string>

#include "src/error.hpp"

using meshsim::PickleGlobalName;
using meshsim::PickleValue;
using Kind = meshsim::PickleValue::Kind;

namespace {

std::string from_hex(std::string_view hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  }
  return out;
}

std::string describe(std::string_view hex, std::span<const PickleGlobalName> allowed = {}) {
  const meshsim::PickleDocument document = meshsim::read_pickle(from_hex(hex), allowed, "test");
  return meshsim::describe_pickle_value(document, document.root, 8, 1000);
}

std::string refusal(const std::string& bytes, std::span<const PickleGlobalName> allowed = {}) {
  try {
    meshsim::read_pickle(bytes, allowed, "x.pkl");
  } catch (const meshsim::Error& e) {
    CHECK(e.type() == meshsim::PyErrorType::kValueError);
    return e.what();
  }
  return "(read)";
}

// pickle.dumps({'a': [1, 2.5, None, True, -7, 2**40, -2**63], 'b': ('x', 'é', ()), 'c': False},
//              protocol=2)
constexpr std::string_view kProtocol2 =
    "80027d71002858010000006171015d7102284b014740040000000000004e884af9ffffff8a06000000000001"
    "8a08000000000000008065580100000062710358010000007871045802000000c3a9710529877106580100000063"
    "710789752e";
// The same with 'c': b'\x00\xff', protocol=4 (framed, MEMOIZE, SHORT_BINUNICODE, SHORT_BINBYTES).
constexpr std::string_view kProtocol4 =
    "8004954a000000000000007d94288c0161945d94284b014740040000000000004e884af9ffffff8a0600000000"
    "00018a080000000000000080658c0162948c0178948c02c3a9942987948c016394430200ff94752e";
// {'s': {1, 2}, 'f': frozenset(), 'l': [[]]*2, 'big': 300, 'n': 70000}, protocol=5: the inner
// list is one value reached twice through the memo.
constexpr std::string_view kProtocol5 =
    "80059536000000000000007d94288c0173948f94284b014b02908c0166942891948c016c945d94285d9468076"
    "58c03626967944d2c018c016e944a70110100752e";
// collections.OrderedDict([('k', 1)]), protocol=2: a GLOBAL, REDUCE and SETITEM on the object.
constexpr std::string_view kOrderedDict =
    "800263636f6c6c656374696f6e730a4f726465726564446963740a71002952710158010000006b71024b01732e";
// A class whose __reduce__ returns (os.system, ('true',)), protocol=2.
constexpr std::string_view kCallsSystem =
    "800263706f7369780a73797374656d0a710058040000007472756571018571025271032e";

}  // namespace

TEST_CASE("pickles of protocols 2, 4 and 5 read as CPython wrote them", "[io][pickle]") {
  CHECK(describe(kProtocol2) ==
        "{'a': [1, 2.5, None, True, -7, 1099511627776, -9223372036854775808], "
        "'b': ('x', '\xc3\xa9', ()), 'c': False}");
  CHECK(describe(kProtocol4) ==
        "{'a': [1, 2.5, None, True, -7, 1099511627776, -9223372036854775808], "
        "'b': ('x', '\xc3\xa9', ()), 'c': b'\\x00\xff'}");
  CHECK(describe(kProtocol5) == "{'s': {1, 2}, 'f': {}, 'l': [[], []], 'big': 300, 'n': 70000}");

  const meshsim::PickleDocument document = meshsim::read_pickle(from_hex(kProtocol5), {}, "t");
  CHECK(document.protocol == 5);
  const PickleValue& dict = document.at(document.root);
  const PickleValue& list = document.at(dict.items[5]);
  REQUIRE(list.items.size() == 2);
  CHECK(list.items[0] == list.items[1]);  // one list, shared through the memo
}

TEST_CASE("a global is read only when allowed and its call is recorded, never made",
          "[io][pickle]") {
  // An OrderedDict is a dict (torch.save passes an empty one to every tensor it rebuilds).
  const PickleGlobalName ordered_dict[] = {{"collections", "OrderedDict"}};
  CHECK(describe(kOrderedDict, ordered_dict) == "{'k': 1}");
  CHECK(refusal(from_hex(kOrderedDict)) ==
        "x.pkl: byte 2: GLOBAL (0x63): collections.OrderedDict is not one of the classes this "
        "file may name");
  CHECK(refusal(from_hex(kCallsSystem)) ==
        "x.pkl: byte 2: GLOBAL (0x63): posix.system is not one of the classes this file may name");
  const PickleGlobalName system[] = {{"posix", "system"}};
  CHECK(describe(kCallsSystem, system) == "posix.system('true',)");
}

TEST_CASE("malformed and hostile pickles are refused with the byte offset", "[io][pickle]") {
  using namespace std::string_literals;
  CHECK(refusal("") == "x.pkl: byte 0: the pickle ends before its STOP opcode");
  CHECK(refusal("\x80\x02N") == "x.pkl: byte 3: the pickle ends before its STOP opcode");
  CHECK(refusal("\x80\x02N.N") == "x.pkl: byte 4: 1 bytes follow the pickle's STOP opcode");
  CHECK(refusal("\x80\x06N.") == "x.pkl: byte 0: PROTO (0x80): protocol 6 is newer than 5");
  CHECK(refusal("\x80\x02h\x05.") == "x.pkl: byte 2: BINGET (0x68): memo entry 5 was never stored");
  CHECK(refusal("\x80\x02X\xff\xff\xff\x00."s) ==
        "x.pkl: byte 2: BINUNICODE (0x58): its argument of 16777215 bytes runs past the end of the "
        "pickle (1 left)");
  CHECK(refusal("\x80\x02X\x00\x00\x00\x02."s) ==
        "x.pkl: byte 2: BINUNICODE (0x58): a string of 33554432 bytes is longer than the 16777216 "
        "allowed");
  CHECK(refusal("\x80\x02\x8c\x02\xc3\x28."s) ==
        "x.pkl: byte 2: SHORT_BINUNICODE (0x8c): the string is not valid UTF-8");
  CHECK(refusal("\x80\x02\x8a\x09" + std::string(9, '\x01') + ".") ==
        "x.pkl: byte 2: LONG1 (0x8a): an integer of 9 bytes is wider than 64 bits");
  CHECK(refusal("I1\n.") ==
        "x.pkl: byte 0: INT (0x49): this opcode is not allowed here (only the data opcodes of "
        "protocols 2-5 are)");
  CHECK(refusal("\x80\x02t.") == "x.pkl: byte 2: TUPLE (0x74): no MARK to pop to");
  CHECK(refusal("\x80\x02.") == "x.pkl: byte 2: STOP (0x2e): STOP with nothing on the stack");
  CHECK(refusal("\x80\x02N(.") ==
        "x.pkl: byte 4: STOP (0x2e): STOP inside a MARK that was never closed");
  // A memo id far past the others goes to a map: no 16 GiB vector for a 12-byte pickle.
  CHECK(describe("8002"
                 "4e72ffffffff"
                 "6affffffff"
                 "2e") == "None");
  CHECK(refusal("\x80\x02)NR.") ==
        "x.pkl: byte 4: REDUCE (0x52): it may only call an allowed class, not ()");
  CHECK(refusal("\x80\x02]Nb.") ==
        "x.pkl: byte 4: BUILD (0x62): it needs a object below its arguments, not []");
  CHECK(refusal(std::string(65, '(') + "N.") ==
        "x.pkl: byte 64: MARK (0x28): MARKs nest deeper than 64");
  // A list that contains itself is fine to read and to describe (the description is cut).
  CHECK(describe("80025d71006800612e") == "[[[[[[[[[...]]]]]]]]]");
}

TEST_CASE("signed LONG1 integers sign-extend as Python's int.from_bytes", "[io][pickle]") {
  using namespace std::string_literals;
  const auto one = [](const std::string& raw) {
    const meshsim::PickleDocument d = meshsim::read_pickle("\x80\x02" + raw + ".", {}, "t");
    REQUIRE(d.at(d.root).kind == Kind::kInt);
    return d.at(d.root).integer;
  };
  CHECK(one("\x8a\x00"s) == 0);
  CHECK(one("\x8a\x01\xff"s) == -1);
  CHECK(one("\x8a\x02\x00\x80"s) == -32768);
  CHECK(one("\x8a\x02\xff\x7f"s) == 32767);
  CHECK(one("J\xfe\xff\xff\xff"s) == -2);
  CHECK(one("M\xff\xff"s) == 65535);
}
