/* sandman: which declarations the shared library exports.
 *
 * The library is built with -fvisibility=hidden: only functions declared in
 * include/sandman/ with SM_API are in libsandman.so's dynamic symbol table;
 * everything else is internal, whatever its name. */
#ifndef SANDMAN_EXPORT_H
#define SANDMAN_EXPORT_H

#define SM_API __attribute__((visibility("default")))

#endif
