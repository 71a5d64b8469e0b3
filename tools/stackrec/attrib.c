/*
 * attrib.c: the responsible module of a stack (attrib.h), and module maps.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/stkr_path.h"
#include "tools/stackrec/attrib.h"
#include "tools/stackrec/json.h"

typedef struct modmap_entry {
  char *name;
  char **images;  /* fnmatch patterns */
  size_t n_images;
  char **symbols; /* function name prefixes */
  size_t n_symbols;
} modmap_entry;

struct stkr_modmap {
  modmap_entry *v;
  size_t n;
};

static bool has_prefix(const char *s, const char *p) {
  return strncmp(s, p, strlen(p)) == 0;
}

const char *stkr_attrib_base_name(const char *path) {
  const char *b = strrchr(path, '/');
  return b ? b + 1 : path;
}

/* path with "." and ".." components taken out, as the loader's rpath
 * "/usr/lib/../../opt/ads" leads out of /usr/lib (QA, session 31: such an
 * SDK counted as the system's); into buf. Lexical only: no link is
 * followed. @return buf, path itself when it has none of them, or NULL
 * when it is too long to take apart (then not the system's: a wrong
 * "system" hides an SDK, a wrong "not" only shows a library). */
static const char *lexical_path(const char *path, char *buf, size_t cap) {
  if (path[0] != '/' || !stkr_path_unclean(path, SIZE_MAX))
    return path;
  return stkr_path_lexical(path, buf, cap) != 0 ? buf : NULL;
}

/* The loader, libc and the hook library, by file name, wherever they are:
 * never an SDK's, whatever a map says (review, session 31: "*.so" claimed
 * them, and every event went to that module). */
static bool system_by_name(const char *path) {
  static const char *const names[] = {"ld-linux", "ld-musl", "libc.so",
                                      "libstackrec_preload"};
  const char *b = stkr_attrib_base_name(path);

  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (has_prefix(b, names[i]))
      return true;
  /* glibc's own file, "libc-2.31.so": not any "libc-" (libc-client.so is
   * the UW IMAP library an app may ship). */
  return has_prefix(b, "libc-") && b[5] >= '0' && b[5] <= '9';
}

bool stkr_attrib_system_image(const char *path) {
  /* /usr/lib/ and /System/ are Apple's too. */
  static const char *const dirs[] = {"/lib/", "/lib64/", "/usr/lib/",
                                     "/usr/lib64/", "/System/"};
  char buf[4096];
  const char *real = lexical_path(path, buf, sizeof buf);

  for (size_t i = 0; real != NULL && i < sizeof dirs / sizeof dirs[0]; i++)
    if (has_prefix(real, dirs[i]))
      return true;
  return system_by_name(path);
}

/* Past `from`, the first `word` outside <...> and (...): where a Swift
 * name's subject starts after "closure #1 () -> () in " or
 * "function signature specialization <Arg[0] = Dead> of ". NULL: none. */
static const char *after_word(const char *from, const char *word) {
  size_t n = strlen(word);
  int depth = 0;
  for (const char *p = from; *p; p++) {
    if (*p == '<' || *p == '(' || *p == '[') depth++;
    else if ((*p == '>' || *p == ')' || *p == ']') && depth > 0) depth--;
    else if (depth == 0 && strncmp(p, word, n) == 0) return p + n;
  }
  return NULL;
}

/* What a demangled Swift name is about, for prefix matching: the swift
 * demangler puts its decorations first ("static PaySDK.PaySDK.f()",
 * "closure #1 () -> () in PaySDK.f()", "(1) await resume partial function
 * for PaySDK.f()", "merged ", "@objc ", specializations, thunks), so a
 * map's natural prefix, the module ("PaySDK."), matched none of them
 * (QA, session 30). "(extension in M):T.f" is M's: written as "M.T.f"
 * into buf. Other names come back as they are. */
static const char *swift_subject(const char *fn, char *buf, size_t cap) {
  static const char *const lead[] = {
      "static ", "@objc ", "@nonobjc ", "merged ", "specialized ",
      /* (not "protocol witness for P.f in conformance T": T's module's) */
      "partial apply forwarder for ", "dispatch thunk of ",
      "await resume partial function for ",
      "suspend resume partial function for ", "async function pointer to ",
      "outlined variable #0 of ", "variable initialization expression of "};
  static const char *const of_lead[] = {
      "function signature specialization ", "generic specialization ",
      "generic partial specialization "};
  for (int round = 0; fn != NULL && round < 16; round++) {
    const char *next = NULL;
    for (size_t i = 0; !next && i < sizeof lead / sizeof *lead; i++)
      if (has_prefix(fn, lead[i])) next = fn + strlen(lead[i]);
    for (size_t i = 0; !next && i < sizeof of_lead / sizeof *of_lead; i++)
      if (has_prefix(fn, of_lead[i]))
        next = after_word(fn + strlen(of_lead[i]), " of ");
    if (!next && fn[0] == '(' && fn[1] >= '0' && fn[1] <= '9') {
      /* "(2) await resume partial function for " */
      const char *p = strchr(fn, ')');
      if (p != NULL && p[1] == ' ') next = p + 2;
    }
    if (!next && (has_prefix(fn, "closure #") ||
                  has_prefix(fn, "implicit closure #")))
      next = after_word(fn, " in ");
    if (!next && has_prefix(fn, "(extension in ")) {
      const char *m = fn + strlen("(extension in "), *e = strstr(m, "):");
      if (e != NULL && e > m &&
          snprintf(buf, cap, "%.*s.%s", (int)(e - m), m, e + 2) < (int)cap)
        return buf;
    }
    if (!next) return fn;
    fn = next;
  }
  return fn;
}

/* The map entry claiming frame f, or NULL. */
/* Does one of e's image globs match the image (its path, or its name b)? */
static bool names_image(const modmap_entry *e, const char *image,
                        const char *b) {
  for (size_t k = 0; k < e->n_images; k++)
    if (fnmatch(e->images[k], image, 0) == 0 ||
        fnmatch(e->images[k], b, 0) == 0)
      return true;
  return false;
}

/* The entry that claims frame f, or NULL. *unnamed: f has no function
 * name and an entry with symbol prefixes came before the claim (or there
 * was none), so a prefix might have claimed f had it been symbolized. */
static const modmap_entry *claim(const stkr_modmap *m, const stkr_frame *f,
                                 bool *unnamed) {
  const char *b = stkr_attrib_base_name(f->image), *fn = f->function;
  char ext[512];
  size_t i, k;

  /* An Objective-C method's prefix is its class's: "-[PSKDevice id]". */
  if (fn != NULL && (fn[0] == '-' || fn[0] == '+') && fn[1] == '[')
    fn += 2;
  const char *subject = swift_subject(fn, ext, sizeof ext);

  for (i = 0; i < m->n; i++) {
    const modmap_entry *e = &m->v[i];
    if (names_image(e, f->image, b))
      return e;
    for (k = 0; fn != NULL && k < e->n_symbols; k++)
      if (has_prefix(fn, e->symbols[k]) || has_prefix(subject, e->symbols[k]))
        return e;
    *unnamed |= fn == NULL && e->n_symbols > 0;
  }
  return NULL;
}

/* claim() by image globs only: a system image is a module only when a map
 * names its file, never by a symbol prefix (libc's own names). */
static const modmap_entry *claim_image(const stkr_modmap *m,
                                       const stkr_frame *f) {
  const char *b = stkr_attrib_base_name(f->image);

  for (size_t i = 0; i < m->n; i++)
    if (names_image(&m->v[i], f->image, b))
      return &m->v[i];
  return NULL;
}

/* A system header's inline wrapper (glibc's fortified open in
 * bits/fcntl2.h, an SDK's inline function), inlined into the code that
 * called it: that code is the one responsible. With -D_FORTIFY_SOURCE
 * (distributions' default flags) every open and gethostname of an SDK
 * linked into the app was the wrapper's, which no symbol prefix claims:
 * the app's (QA, session 41: compliance said "no findings"). */
static bool header_wrapper(const stkr_frame *f) {
  return f->inlined && f->file != NULL && strstr(f->file, "/usr/include/");
}

const char *stkr_attrib_module(const stkr_modmap *map, const stkr_frame *f,
                               size_t n, bool *unnamed) {
  const char *first = NULL;
  bool ignored;
  size_t i;

  if (unnamed == NULL)
    unnamed = &ignored;
  *unnamed = false;
  for (i = 0; i < n; i++) {
    const char *img = f[i].image;
    if (img == NULL || (header_wrapper(&f[i]) && i + 1 < n))
      continue;
    if (!stkr_attrib_system_image(img)) {
      const modmap_entry *e = map != NULL ? claim(map, &f[i], unnamed) : NULL;
      return e != NULL ? e->name : stkr_attrib_base_name(img);
    }
    /* A system directory's image a map names by image: the map knows
     * better (an app packaged under /usr/lib/<app>/, as Debian's Electron
     * apps and Firefox are; QA, session 31). */
    const modmap_entry *e =
        map != NULL && !system_by_name(img) ? claim_image(map, &f[i]) : NULL;
    if (e != NULL)
      return e->name;
    if (first == NULL)
      first = img;
  }
  return first ? stkr_attrib_base_name(first) : STKR_ATTRIB_NO_MODULE;
}

/* ---- module maps ----------------------------------------------------------- */

static void entry_free(modmap_entry *e) {
  free(e->name);
  stkr_json_strings_free(e->images, e->n_images);
  stkr_json_strings_free(e->symbols, e->n_symbols);
}

void stkr_modmap_free(stkr_modmap *m) {
  size_t i;

  if (m == NULL)
    return;
  for (i = 0; i < m->n; i++)
    entry_free(&m->v[i]);
  free(m->v);
  free(m);
}

static int parse_entry(const char *name, const stkr_json *o, modmap_entry *e,
                       char *err, size_t errlen) {
  size_t i;
  int rc;

  if (o->type != STKR_JSON_OBJECT)
    return stkr_json_error(err, errlen, name, o, "a module must be an object");
  for (i = 0; i < o->n; i++) {
    const char *k = o->keys[i];
    const stkr_json *v = &o->items[i];

    if (strcmp(k, "name") == 0 && e->name == NULL) {
      if (v->type != STKR_JSON_STRING || v->str[0] == '\0')
        return stkr_json_error(err, errlen, name, v,
                               "\"name\" must be a non-empty string");
      if ((e->name = strdup(v->str)) == NULL)
        return -ENOMEM;
    } else if (strcmp(k, "images") == 0 && e->images == NULL) {
      if ((rc = stkr_json_strings(v, true, "\"images\"", name, &e->images,
                                  &e->n_images, err, errlen)) != 0)
        return rc;
    } else if (strcmp(k, "symbols") == 0 && e->symbols == NULL) {
      if ((rc = stkr_json_strings(v, true, "\"symbols\"", name, &e->symbols,
                                  &e->n_symbols, err, errlen)) != 0)
        return rc;
    } else {
      return stkr_json_error(err, errlen, name, v,
                             "unknown or repeated key: %s", k);
    }
  }
  if (e->name == NULL)
    return stkr_json_error(err, errlen, name, o, "a module needs a \"name\"");
  if (e->n_images == 0 && e->n_symbols == 0)
    return stkr_json_error(err, errlen, name, o,
                           "a module needs \"images\" or \"symbols\": %s",
                           e->name);
  return 0;
}

static int from_tree(const char *name, const stkr_json *root, void *obj,
                     char *err, size_t errlen) {
  stkr_modmap *m = obj;
  const stkr_json *mods;
  size_t i;
  int rc;

  if (root->type != STKR_JSON_OBJECT)
    return stkr_json_error(err, errlen, name, root,
                           "expected an object {\"modules\": [...]}");
  for (i = 0; i < root->n; i++)
    if (strcmp(root->keys[i], "modules") != 0 ||
        stkr_json_get(root, "modules") != &root->items[i])
      return stkr_json_error(err, errlen, name, &root->items[i],
                             "unknown or repeated key: %s", root->keys[i]);
  if ((mods = stkr_json_get(root, "modules")) == NULL)
    return stkr_json_error(err, errlen, name, root, "no \"modules\" array");
  if (mods->type != STKR_JSON_ARRAY)
    return stkr_json_error(err, errlen, name, mods,
                           "\"modules\" must be an array");
  if (mods->n > 0 && (m->v = calloc(mods->n, sizeof *m->v)) == NULL)
    return -ENOMEM;
  for (i = 0; i < mods->n; i++) {
    m->n = i + 1; /* freed whole on failure */
    if ((rc = parse_entry(name, &mods->items[i], &m->v[i], err, errlen)) != 0)
      return rc;
  }
  return 0;
}

static void modmap_free(void *obj) { stkr_modmap_free(obj); }

static const stkr_json_doc_type modmap_doc = {
    sizeof(stkr_modmap), from_tree, modmap_free};

int stkr_modmap_parse(const char *name, const char *text, size_t len,
                      stkr_modmap **out, char *err, size_t errlen) {
  return stkr_json_read_doc(&modmap_doc, name, text, len, out, err, errlen);
}

int stkr_modmap_load(const char *path, stkr_modmap **out, char *err,
                     size_t errlen) {
  return stkr_json_read_doc(&modmap_doc, path, NULL, 0, out, err, errlen);
}
