/* libarchive, loaded with dlopen the first time an image is imported rather than linked: it
 * brings libxml2, ICU and libstdc++ along (about 2 MB of resident pages in every agent process,
 * measured with bench/pods.py), while an agent imports images rarely (`kite images import`,
 * the runtime's import). systemd loads its optional libraries the same way. The types and
 * constants still come from libarchive's own headers; only the calls go through the table. */
#pragma once
#include <archive.h>
#include <archive_entry.h>

#define KITE_LIBARCHIVE_SONAME "libarchive.so.13"

struct kite_libarchive {
#define LA_FN(name) __typeof__(name) *name
    LA_FN(archive_entry_filetype);
    LA_FN(archive_entry_hardlink);
    LA_FN(archive_entry_pathname);
    LA_FN(archive_entry_set_hardlink);
    LA_FN(archive_entry_set_pathname);
    LA_FN(archive_entry_size);
    LA_FN(archive_error_string);
    LA_FN(archive_read_data);
    LA_FN(archive_read_data_block);
    LA_FN(archive_read_free);
    LA_FN(archive_read_new);
    LA_FN(archive_read_next_header);
    LA_FN(archive_read_open_filename);
    LA_FN(archive_read_support_filter_all);
    LA_FN(archive_read_support_format_tar);
    LA_FN(archive_write_close);
    LA_FN(archive_write_data_block);
    LA_FN(archive_write_disk_new);
    LA_FN(archive_write_disk_set_options);
    LA_FN(archive_write_finish_entry);
    LA_FN(archive_write_free);
    LA_FN(archive_write_header);
#undef LA_FN
};

/* The loaded table (the same one for the process; thread-safe), or NULL with *ret_error (a new
 * string) naming what is missing. */
const struct kite_libarchive *kite_libarchive_load(char **ret_error);
