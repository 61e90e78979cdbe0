// A check of XML archive payloads before Boost reads them. Boost 1.74's xml_iarchive compares a
// closing tag with the name it expects using the length read from the input, so a closing tag
// longer than the expected name makes it read past the end of that name (libFuzzer found both a
// garbage tag and a valid name in the wrong place doing this in fuzz_rng_record). A payload must
// therefore have exactly the tags, in the order, that meshsim's writer produces for the record.
#pragma once

#include <string_view>

namespace meshsim {

// Throws meshsim::Error (RuntimeError) "corrupt WHAT record (xml archive): ..." unless the
// sequence of opening and closing tag names of `payload` equals that of `reference` (a payload
// the writer produced for a record of the same shape). Linear; allocates per tag.
void check_xml_tags(std::string_view payload, std::string_view reference, std::string_view what);

}  // namespace meshsim
