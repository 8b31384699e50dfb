/* The text scan of json/scan.c as it was before its one-pass rewrite (member by member, each
 * path from the root, values skipped a byte at a time), kept as the reference the rewrite must
 * agree with (tests/unit/json/test_scan.c) and as the baseline of bench/json-project.c. */
#pragma once
#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "json/obj.h"
#include "json/parse.h"

static size_t ref_skip_ws(const char *s, size_t n, size_t i) {
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) i++;
    return i;
}

/* Where the string starting at s[i] ('"') ends (one past its closing quote), or SIZE_MAX. */
static size_t ref_skip_string(const char *s, size_t n, size_t i, bool *escaped) {
    for (i++; i < n; i++) {
        if (s[i] == '\\') {
            if (escaped) *escaped = true;
            i++;
        } else if (s[i] == '"') {
            return i + 1;
        }
    }
    return SIZE_MAX;
}

/* Where the value starting at s[i] (after whitespace) ends, or SIZE_MAX when it is not well
 * formed as far as this scan can tell. */
static size_t ref_skip_value(const char *s, size_t n, size_t i) {
    i = ref_skip_ws(s, n, i);
    if (i >= n) return SIZE_MAX;
    if (s[i] == '"') return ref_skip_string(s, n, i, NULL);
    if (s[i] != '{' && s[i] != '[') {
        size_t b = i;
        while (i < n && s[i] != ',' && s[i] != '}' && s[i] != ']' && s[i] != ' ' && s[i] != '\n' && s[i] != '\t' &&
               s[i] != '\r')
            i++;
        return i > b ? i : SIZE_MAX;
    }
    int depth = 0;
    for (; i < n; i++) {
        if (s[i] == '"') {
            i = ref_skip_string(s, n, i, NULL);
            if (i == SIZE_MAX) return SIZE_MAX;
            i--;
        } else if (s[i] == '{' || s[i] == '[') {
            depth++;
        } else if (s[i] == '}' || s[i] == ']') {
            if (--depth == 0) return i + 1;
        }
    }
    return SIZE_MAX;
}

static int ref_json_member(const char *s, size_t n, const char *name, const char **ret, size_t *ret_len) {
    size_t nl = strlen(name), i = ref_skip_ws(s, n, 0);
    int found = 0;
    if (i >= n || s[i] != '{') return -1;
    i = ref_skip_ws(s, n, i + 1);
    if (i < n && s[i] == '}') return 0;
    for (;;) {
        if (i >= n || s[i] != '"') return -1;
        bool esc = false;
        size_t k = ref_skip_string(s, n, i, &esc);
        if (k == SIZE_MAX || esc) return -1;
        bool match = k - i - 2 == nl && memcmp(s + i + 1, name, nl) == 0;
        i = ref_skip_ws(s, n, k);
        if (i >= n || s[i] != ':') return -1;
        size_t v = ref_skip_ws(s, n, i + 1), e = ref_skip_value(s, n, v);
        if (e == SIZE_MAX) return -1;
        if (match) {
            *ret = s + v;
            *ret_len = e - v;
            found = 1;
        }
        i = ref_skip_ws(s, n, e);
        if (i < n && s[i] == '}') return found;
        if (i >= n || s[i] != ',') return -1;
        i = ref_skip_ws(s, n, i + 1);
    }
}

/* Puts v at the dotted path under out, making the objects on the way (v is taken). */
static void ref_put_path(json_object *out, const char *path, json_object *v) {
    const char *dot;
    json_object *at = out;
    while ((dot = strchr(path, '.'))) {
        char seg[128];
        snprintf(seg, sizeof seg, "%.*s", (int)(dot - path), path);
        at = kite_obj_ensure(at, seg);
        path = dot + 1;
    }
    json_object_object_add(at, path, v);
}

static json_object *ref_json_project(const char *s, size_t n, const char *const *paths) {
    json_object *out = json_object_new_object();
    for (size_t p = 0; paths[p]; p++) {
        const char *v = s, *path = paths[p];
        size_t vn = n;
        int r = 1;
        for (;;) {
            const char *dot = strchr(path, '.');
            char seg[128];
            size_t sl = dot ? (size_t)(dot - path) : strlen(path);
            if (sl >= sizeof seg) r = -1;
            if (r < 0) break;
            memcpy(seg, path, sl);
            seg[sl] = 0;
            const char *m;
            size_t mn;
            r = ref_json_member(v, vn, seg, &m, &mn);
            if (r <= 0) break;
            v = m;
            vn = mn;
            if (!dot) break;
            if (vn == 4 && memcmp(v, "null", 4) == 0) { /* (a null on the way: the member is absent) */
                r = 0;
                break;
            }
            path = dot + 1;
        }
        if (r < 0) {
            json_object_put(out);
            return NULL;
        }
        if (r == 0) continue;
        enum json_tokener_error e;
        size_t end = 0;
        json_object *val;
        if (*v == '"' || *v == '{' || *v == '[') {
            val = kite_json_parse(v, vn, JSON_TOKENER_DEFAULT_DEPTH, &e, &end);
        } else { /* a number or literal: the parser sees its end only at a byte after it */
            char lit[64];
            if (vn >= sizeof lit) {
                json_object_put(out);
                return NULL;
            }
            memcpy(lit, v, vn);
            lit[vn] = ' ';
            val = kite_json_parse(lit, vn + 1, JSON_TOKENER_DEFAULT_DEPTH, &e, &end);
            if (end == vn + 1) end = vn;
        }
        if (e != json_tokener_success || end != vn) {
            json_object_put(val);
            json_object_put(out);
            return NULL;
        }
        if (val) ref_put_path(out, paths[p], val); /* (null: absent, as kite_obj_project has it) */
    }
    return out;
}

