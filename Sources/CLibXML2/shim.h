#ifndef VCACHE_CLIBXML2_SHIM_H
#define VCACHE_CLIBXML2_SHIM_H
#include <libxml/xmlversion.h>
// Debian's libxml2 is built with ICU, so encoding.h includes ICU's headers, which clash with the
// copy Foundation's _FoundationICU module carries. vcache never touches the encoding handler
// struct whose layout those fields change (libxml2 picks its converters itself).
#undef LIBXML_ICU_ENABLED
#include <libxml/xmlreader.h>
#include <libxml/xmlerror.h>
#include <libxml/tree.h>
#include <libxml/parser.h>
#include <libxml/xmlmemory.h>
// xmlFree is a global function pointer (Swift 6 refuses it as shared mutable state).
static inline void vc_xml_free(void *p) { xmlFree(p); }
#endif
