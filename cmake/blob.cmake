# Writes a static binary (sandman-agent, sandman-egress) as a C array, with
# its length and SHA-256:
#   cmake -DIN=<binary> -DOUT=<file.c> [-DSYMBOL=sm_agent_blob -DHEADER=sandbox/agent_blob.h] -P blob.cmake
# Run at build time so the library always carries the program just built.
if(NOT IN OR NOT OUT)
  message(FATAL_ERROR "usage: cmake -DIN=<binary> -DOUT=<file.c> [-DSYMBOL=name -DHEADER=path] -P blob.cmake")
endif()
if(NOT SYMBOL)
  set(SYMBOL sm_agent_blob)
endif()
if(NOT HEADER)
  set(HEADER sandbox/agent_blob.h)
endif()
file(READ "${IN}" hex HEX)
file(SHA256 "${IN}" sha)
file(SIZE "${IN}" len)
if(len EQUAL 0)
  message(FATAL_ERROR "${IN} is empty")
endif()
# 16 bytes per line keeps the generated file readable in an editor (CMake's
# regular expressions have no {n} repeat, hence string(REPEAT)).
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REPEAT "0x[0-9a-f][0-9a-f]," 16 line)
string(REGEX REPLACE "(${line})" "\\1\n  " bytes "${bytes}")
string(STRIP "${bytes}" bytes)
file(WRITE "${OUT}.tmp"
  "/* Generated from ${IN} by cmake/blob.cmake; do not edit. */\n"
  "#include \"${HEADER}\"\n\n"
  "const unsigned char ${SYMBOL}[] = {\n  ${bytes}\n};\n"
  "const size_t ${SYMBOL}_len = ${len};\n"
  "const char ${SYMBOL}_sha256[65] = \"${sha}\";\n")
file(RENAME "${OUT}.tmp" "${OUT}")
