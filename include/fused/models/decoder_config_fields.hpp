// The fields of decoder::config by name, through Boost.Hana, for whatever walks them: config checks
// (fused/io/hf_config.hpp lists every differing field), `fused plan`'s JSON and the C generator.
//
//   boost::hana::for_each(boost::hana::accessors<fused::decoder::config>(), [&](auto field) { ... });
//
// Kept out of decoder_config.hpp so that a static model does not parse Hana. The list below must name
// every field once, in declaration order; Boost.PFR, which sees the fields without their names,
// proves it at compile time (the count, and that position I of both is the same member), so a field
// added to the struct and not here is a compile error, not a silently skipped check.
#pragma once
#include <cstddef>
#include <utility>

#include <boost/hana/accessors.hpp>
#include <boost/hana/adapt_struct.hpp>
#include <boost/hana/at.hpp>
#include <boost/hana/first.hpp>
#include <boost/hana/for_each.hpp>
#include <boost/hana/length.hpp>
#include <boost/hana/second.hpp>
#include <boost/hana/string.hpp>
#include <boost/pfr/core.hpp>
#include <boost/pfr/tuple_size.hpp>

#include "decoder_config.hpp"

BOOST_HANA_ADAPT_STRUCT(fused::decoder::config, vocab_size, hidden_size, intermediate_size, num_hidden_layers,
                        num_attention_heads, num_key_value_heads, head_dim, max_position_embeddings, rms_norm_eps,
                        rope_theta, tie_word_embeddings, attention_bias, mlp_bias, rope_type, rope_factor,
                        rope_low_freq_factor, rope_high_freq_factor, rope_original_max_position_embeddings, sliding_window,
                        attention_dropout);

namespace fused::decoder::detail {

inline constexpr config probe{};

// Position I of the Hana list and field I of the declaration are the same member of one object.
template <std::size_t... I>
constexpr bool fields_match_declaration(std::index_sequence<I...>) {
  constexpr auto fields = boost::hana::accessors<config>();
  return ((static_cast<const void*>(&boost::hana::second(boost::hana::at_c<I>(fields))(probe)) ==
           static_cast<const void*>(&boost::pfr::get<I>(probe))) &&
          ...);
}

static_assert(decltype(boost::hana::length(boost::hana::accessors<config>()))::value == boost::pfr::tuple_size_v<config>,
              "fused: BOOST_HANA_ADAPT_STRUCT(fused::decoder::config, ...) must list every field of decoder::config");
static_assert(fields_match_declaration(std::make_index_sequence<boost::pfr::tuple_size_v<config>>{}),
              "fused: BOOST_HANA_ADAPT_STRUCT(fused::decoder::config, ...) must list the fields in declaration order");

}  // namespace fused::decoder::detail

namespace fused::decoder {

// Calls f(name, value) for each field a printed config shows (the C header, `fused plan`'s JSON,
// the layout fingerprint): the first always_printed_fields always, a feature only when it is set,
// so that a model without features prints as it did before families had them.
template <class F>
void for_each_printed_field(const config& c, F&& f) {
  int index = 0;
  boost::hana::for_each(boost::hana::accessors<config>(), [&](auto field) {
    const auto value = boost::hana::second(field)(c);
    if (index++ < always_printed_fields || value != decltype(value){}) f(boost::hana::to<const char*>(boost::hana::first(field)), value);
  });
}

}  // namespace fused::decoder
