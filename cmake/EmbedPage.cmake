# Embeds a self-contained HTML page into a C++ header, so that the installed binary needs no data
# files (Note [Chat page] in apps/serve/chat_page.cpp). Run at build time:
#   cmake -DINPUT=page.html -DOUTPUT=page.hpp -DNAMESPACE=ns -P EmbedPage.cmake
# The header holds the page's bytes, the SHA-256 of the page (its ETag) and the base64 SHA-256 of
# its one inline <script> and one inline <style> (its Content-Security-Policy allows those two and
# nothing else inline). No xxd: file(READ ... HEX).
cmake_minimum_required(VERSION 3.25)
foreach(var INPUT OUTPUT NAMESPACE)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "EmbedPage.cmake: -D${var}=... is required")
  endif()
endforeach()

# 64 hex digits (a SHA-256) as base64, as CSP's 'sha256-...' sources spell it.
function(base64_of_hex hex out)
  set(alphabet "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
  string(LENGTH "${hex}" n)
  set(result "")
  set(i 0)
  while(i LESS n)
    string(SUBSTRING "${hex}" ${i} 6 group)  # 3 bytes, or the 1 or 2 left at the end
    string(LENGTH "${group}" g)
    set(padded "${group}")
    while(NOT padded MATCHES "^......$")
      string(APPEND padded "00")
    endwhile()
    math(EXPR value "0x${padded}")
    math(EXPR chars "${g} / 2 + 1")  # 1 byte: 2 characters, 2: 3, 3: 4
    foreach(k RANGE 3)
      if(k LESS chars)
        math(EXPR index "(${value} >> (18 - 6 * ${k})) & 63")
        string(SUBSTRING "${alphabet}" ${index} 1 c)
        string(APPEND result "${c}")
      else()
        string(APPEND result "=")
      endif()
    endforeach()
    math(EXPR i "${i} + 6")
  endwhile()
  set(${out} "${result}" PARENT_SCOPE)
endfunction()

# The base64 SHA-256 of the text inside the page's only <tag>...</tag> (exactly that text, as the
# browser hashes it).
function(inline_hash text tag out)
  string(FIND "${text}" "<${tag}>" open)
  string(FIND "${text}" "<${tag}>" last REVERSE)
  string(FIND "${text}" "</${tag}>" close)
  if(open EQUAL -1 OR close EQUAL -1 OR NOT open EQUAL last OR close LESS open)
    message(FATAL_ERROR "${INPUT}: the page must have exactly one <${tag}> (without attributes) and its </${tag}>")
  endif()
  string(LENGTH "<${tag}>" skip)
  math(EXPR begin "${open} + ${skip}")
  math(EXPR length "${close} - ${begin}")
  string(SUBSTRING "${text}" ${begin} ${length} inner)
  string(SHA256 digest "${inner}")
  base64_of_hex(${digest} b64)
  set(${out} "${b64}" PARENT_SCOPE)
endfunction()

file(READ "${INPUT}" text)
file(READ "${INPUT}" hex HEX)
file(SHA256 "${INPUT}" page_sha256)
inline_hash("${text}" script script_sha256)
inline_hash("${text}" style style_sha256)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REPLACE "0x0a," "0x0a,\n" bytes "${bytes}")  # a line of the header per line of the page
get_filename_component(name "${INPUT}" NAME)
set(header "// Generated from ${name} by cmake/EmbedPage.cmake at build time: edit the page, not this.
#pragma once

namespace ${NAMESPACE} {

inline constexpr unsigned char kBytes[] = {
${bytes}};
inline constexpr char kSha256[] = \"${page_sha256}\";
inline constexpr char kScriptSha256[] = \"${script_sha256}\";  // base64, for script-src
inline constexpr char kStyleSha256[] = \"${style_sha256}\";    // base64, for style-src

}  // namespace ${NAMESPACE}
")
file(WRITE "${OUTPUT}" "${header}")
