# cmake -DINPUT=file -DOUTPUT=file.inc -P MaxcEmbedFile.cmake
# Writes INPUT's bytes as a comma-separated list of C hex literals, to
# #include inside an array initializer (the CPU runtime's bitcode, see
# lib/Codegen/Cpu/Runtime.cpp).
file(READ ${INPUT} hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" bytes "${bytes}")
file(WRITE ${OUTPUT}.tmp "${bytes}\n")
file(COPY_FILE ${OUTPUT}.tmp ${OUTPUT} ONLY_IF_DIFFERENT)
file(REMOVE ${OUTPUT}.tmp)
