/*
 * privacy_manifest.c: `stackrec privacy-manifest [--manifest FILE]
 * [--module-map FILE] [-o FILE] [filters] DIR...`.
 *
 * Writes a draft PrivacyInfo.xcprivacy (XML property list) whose
 * NSPrivacyAccessedAPITypes lists every required-reason category
 * (reasons.h) the recording used, one dict per category with an empty
 * NSPrivacyAccessedAPITypeReasons array: which reason applies is for a
 * person to choose. Before each dict, XML comments name the modules
 * (attrib.h) that called the category's APIs, each with its sites, event
 * counts and innermost frames, and the reason codes Apple offers.
 *
 * With --per-module DIR, also one draft per module (DIR/<module>.xcprivacy,
 * the module's categories only): Apple wants a manifest in every SDK's
 * bundle, and an SDK's vendor can check theirs against it.
 *
 * With --manifest FILE (the app's own manifest, read with plist.h), the
 * categories used but not declared there are listed on stderr, and the
 * exit status is 1; categories declared but never seen are noted.
 * Exit status: 0, 1 (used but not declared; or data lost; or the output
 * could not be written), 2 usage or a malformed manifest or module map
 * (the message names the file and line), 3 an input cannot be opened.
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "tools/stackrec/cli.h"
#include "tools/stackrec/compliance.h"
#include "tools/stackrec/filter.h"
#include "tools/stackrec/plist.h"
#include "tools/stackrec/reasons.h"

#define MAX_CATS 8
#define COMMENT_FRAMES 4

static const char help[] =
    "Usage: stackrec privacy-manifest [--manifest PrivacyInfo.xcprivacy]\n"
    "                                 [--module-map FILE] [-o FILE]\n"
    "                                 [filters] DIR|FILE...\n"
    "\n"
    "Write a draft PrivacyInfo.xcprivacy listing the required-reason API\n"
    "categories (FileTimestamp, SystemBootTime, DiskSpace, ActiveKeyboards,\n"
    "UserDefaults) the recording used, with the modules and call sites that\n"
    "used them as comments; the reasons are left for you to choose.\n"
    "\n"
    "  --manifest FILE    the app's manifest: list the categories used but\n"
    "                     not declared there (exit 1)\n"
    "  --module-map FILE  SDK names for images and symbol prefixes (as for\n"
    "                     compliance)\n"
    "  -o FILE            write the draft there instead of stdout\n"
    "  --per-module DIR   also one draft per module: DIR/<module>.xcprivacy\n"
    "                     (created; characters other than [A-Za-z0-9._-] in\n"
    "                     a module's name become '_')\n";

static const char help_exit[] =
    "Exit status: 0 every used category declared (or no --manifest), 1 a\n"
    "category used but not declared (or data lost, or --per-module with\n"
    "stacks never symbolized, whose module a map's symbol prefixes could\n"
    "not name), 2 usage error or a\n"
    "malformed manifest or module map, 3 an input cannot be opened.\n";

/* "--" may not appear in an XML comment. */
static void put_comment_text(FILE *f, const char *s) {
  for (; *s; s++) {
    if (*s == '-' && (s[1] == '-' || s[1] == '\0'))
      fputs("- ", f);
    else if ((unsigned char)*s < 0x20)
      putc(' ', f);
    else
      putc(*s, f);
  }
}

/* Which categories the groups used (category index per group, or -1). */
static size_t used_categories(const stkr_comp *c, int *cat_of, bool *used) {
  size_t i, k, n = 0;

  for (k = 0; k < stkr_reason_category_count; k++)
    used[k] = false;
  for (i = 0; i < c->n_groups; i++) {
    const stkr_reason_category *rc = stkr_reason_of_site(c->groups[i].site);
    cat_of[i] = rc ? (int)(rc - stkr_reason_categories) : -1;
    if (rc != NULL && !used[cat_of[i]]) {
      used[cat_of[i]] = true;
      n++;
    }
  }
  return n;
}

/* module NULL: every module's groups; else only that module's. */
static void put_category(FILE *f, const stkr_comp *c, const int *cat_of,
                         size_t k, const char *module) {
  const stkr_reason_category *rc = &stkr_reason_categories[k];
  size_t i, j;

  fprintf(f, "    <!-- %s: choose the reasons that apply (%s) -->\n",
          rc->short_name, rc->reason_codes);
  for (i = 0; i < c->n_groups; i++) {
    const stkr_comp_group *g = &c->groups[i];
    const stkr_agg_stack *s = &c->agg->stacks[g->example];
    if (cat_of[i] != (int)k ||
        (module != NULL && strcmp(g->module, module) != 0))
      continue;
    fputs("    <!-- used by ", f);
    put_comment_text(f, g->module);
    fputs(": ", f);
    put_comment_text(f, g->site);
    fprintf(f, ", %" PRIu64 " event%s, at", g->count, g->count == 1 ? "" : "s");
    for (j = 0; j < s->n_frames && j < COMMENT_FRAMES; j++) {
      char buf[1024];
      fputs(j ? " < " : " ", f);
      put_comment_text(f, stkr_agg_frame_text(&s->frames[j], STKR_AGG_BY_LINE,
                                              buf, sizeof buf));
    }
    fputs(" -->\n", f);
  }
  fprintf(f, "    <dict>\n"
          "      <key>NSPrivacyAccessedAPIType</key>\n"
          "      <string>%s</string>\n"
          "      <key>NSPrivacyAccessedAPITypeReasons</key>\n"
          "      <array/>\n"
          "    </dict>\n", rc->type);
}

/* unwatched: no process watched `reasons`; empty: there is no process at
 * all (which says more). */
static int write_draft(FILE *f, const stkr_comp *c, const int *cat_of,
                       const bool *used, const char *module, bool unwatched,
                       bool empty) {
  size_t k;

  fputs("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        "<!DOCTYPE plist PUBLIC \"-//Apple//DTD PLIST 1.0//EN\" "
        "\"http://www.apple.com/DTDs/PropertyList-1.0.dtd\">\n"
        "<!-- Draft by stackrec privacy-manifest: the required-reason API\n"
        "     categories this recording used. Fill in each category's\n"
        "     NSPrivacyAccessedAPITypeReasons before shipping. -->\n", f);
  if (empty)
    fputs("<!-- INCOMPLETE: the recording holds no process: nothing was\n"
          "     recorded. -->\n", f);
  else if (unwatched) /* no "--" inside: XML comments may not hold it */
    fputs("<!-- INCOMPLETE: no process of the recording watched category\n"
          "     " STKR_REASONS_CATEGORY ": the categories below may not be all the "
          "app uses.\n     Record with stackrec record -c ...,"
          STKR_REASONS_CATEGORY " -->\n", f);
  fputs("<plist version=\"1.0\">\n<dict>\n"
        "  <key>NSPrivacyAccessedAPITypes</key>\n  <array>\n", f);
  for (k = 0; k < stkr_reason_category_count; k++)
    if (used[k])
      put_category(f, c, cat_of, k, module);
  fputs("  </array>\n</dict>\n</plist>\n", f);
  if (fflush(f) != 0 || ferror(f))
    return -(errno ? errno : EIO);
  return 0;
}

/* Is code in the comma-separated list? */
static bool code_listed(const char *list, const char *code) {
  size_t n = strlen(code);
  for (const char *p = list; *p != '\0';) {
    size_t k = strcspn(p, ",");
    if (k == n && strncmp(p, code, n) == 0) return true;
    p += k;
    p += strspn(p, ", ");
  }
  return false;
}

/* Apple's form of a reason code: four upper-case hex digits, a dot, a
 * number ("DDA9.1"; App Store Connect compares them as written). */
static bool code_form(const char *c) {
  size_t i;
  for (i = 0; i < 4; i++)
    if (!isdigit((unsigned char)c[i]) && !(c[i] >= 'A' && c[i] <= 'F'))
      return false;
  if (c[4] != '.' || c[5] == '\0') return false;
  for (i = 5; c[i] != '\0'; i++)
    if (!isdigit((unsigned char)c[i])) return false;
  return true;
}

/* Does reason `why` (one item of NSPrivacyAccessedAPITypeReasons) give a
 * reason for category rc? An empty text, not a <string>, or another
 * category's code, or a text not of a code's form does not (QA, session
 * 39: "", "BOGUS.9" and 35F9.1 under DiskSpace counted as reasons); a
 * code of Apple's form this table does not know (Apple may add some)
 * does, with a note. Notes on stderr. */
static bool reason_valid(const char *path, const stkr_reason_category *rc,
                         const stkr_json *why) {
  const char *code = why->type == STKR_JSON_STRING ? why->str : NULL;
  size_t k;

  if (code == NULL || !code_form(code)) {
    fprintf(stderr, "stackrec privacy-manifest: %s:%u: %s: a reason must "
            "be one of its codes (%s), not %s%s%s\n", path, why->line,
            rc->short_name, rc->reason_codes,
            code == NULL ? "another kind of value" : "\"",
            code == NULL ? "" : code, code == NULL ? "" : "\"");
    return false;
  }
  if (code_listed(rc->reason_codes, code)) return true;
  for (k = 0; k < stkr_reason_category_count; k++)
    if (code_listed(stkr_reason_categories[k].reason_codes, code)) {
      fprintf(stderr, "stackrec privacy-manifest: %s:%u: %s: reason %s is "
              "%s's, not its own (%s)\n", path, why->line, rc->short_name,
              code, stkr_reason_categories[k].short_name, rc->reason_codes);
      return false;
    }
  fprintf(stderr, "stackrec privacy-manifest: %s:%u: note: %s: reason "
          "\"%s\" is not one of the codes known here (%s)\n", path,
          why->line, rc->short_name, code, rc->reason_codes);
  return true;
}

/* The categories the manifest declares (declared[k]), and those declared
 * with reasons that are all valid, one at least (reasoned[k]:
 * reason_valid; an invalid one beside valid ones is refused too: App
 * Store Connect would); unknown types are noted on stderr. @return 0 or 2
 * after a message (wrong shape). */
static int declared_categories(const char *path, const stkr_json *root,
                               bool *declared, bool *reasoned) {
  const stkr_json *types = stkr_json_get(root, "NSPrivacyAccessedAPITypes");
  size_t i;

  for (i = 0; i < stkr_reason_category_count; i++)
    declared[i] = reasoned[i] = false;
  if (root->type != STKR_JSON_OBJECT) {
    fprintf(stderr, "stackrec privacy-manifest: %s:%u: the plist's value "
            "must be a <dict>\n", path, root->line);
    return STKR_CLI_USAGE;
  }
  if (types == NULL)
    return 0; /* declares nothing */
  if (types->type != STKR_JSON_ARRAY) {
    fprintf(stderr, "stackrec privacy-manifest: %s:%u: "
            "NSPrivacyAccessedAPITypes must be an <array>\n", path,
            types->line);
    return STKR_CLI_USAGE;
  }
  for (i = 0; i < types->n; i++) {
    const stkr_json *t = stkr_json_get(&types->items[i],
                                         "NSPrivacyAccessedAPIType");
    const stkr_reason_category *rc;
    if (t == NULL || t->type != STKR_JSON_STRING) {
      fprintf(stderr, "stackrec privacy-manifest: %s:%u: an entry of "
              "NSPrivacyAccessedAPITypes needs an NSPrivacyAccessedAPIType "
              "<string>\n", path, types->items[i].line);
      return STKR_CLI_USAGE;
    }
    const stkr_json *why = stkr_json_get(&types->items[i],
                                         "NSPrivacyAccessedAPITypeReasons");
    if ((rc = stkr_reason_by_type(t->str)) == NULL) {
      fprintf(stderr, "stackrec privacy-manifest: %s:%u: note: unknown "
              "category \"%s\"\n", path, t->line, t->str);
      continue;
    }
    size_t k = (size_t)(rc - stkr_reason_categories), r, valid = 0;
    declared[k] = true;
    for (r = 0; why != NULL && why->type == STKR_JSON_ARRAY && r < why->n;
         r++)
      valid += reason_valid(path, rc, &why->items[r]);
    reasoned[k] = valid > 0 && valid == r;
  }
  return 0;
}

/* Compare used with declared: @return 0, or 1 (used, not declared; or
 * declared without a reason). */
static int check_manifest(const char *path, const stkr_comp *c,
                          const int *cat_of, const bool *used,
                          const bool *declared, const bool *reasoned) {
  size_t k, i, missing = 0;

  for (k = 0; k < stkr_reason_category_count; k++) {
    const stkr_reason_category *rc = &stkr_reason_categories[k];
    /* The draft this command writes leaves the reasons to a person: given
     * back unfinished, it passed (QA). App Store Connect refuses it. */
    if (declared[k] && !reasoned[k]) {
      missing++;
      fprintf(stderr, "stackrec privacy-manifest: %s: declared without a "
              "reason: %s (its NSPrivacyAccessedAPITypeReasons is empty or "
              "missing, or holds what is none of its codes, above; App "
              "Store Connect refuses that: choose the reasons that "
              "apply)\n", path, rc->type);
    }
    if (used[k] && !declared[k]) {
      missing++;
      fprintf(stderr, "stackrec privacy-manifest: %s: used but not "
              "declared: %s, by", path, rc->type);
      for (i = 0; i < c->n_groups; i++)
        if (cat_of[i] == (int)k)
          fprintf(stderr, " %s (%s, %" PRIu64 ")", c->groups[i].module,
                  c->groups[i].site, c->groups[i].count);
      fputc('\n', stderr);
    } else if (declared[k] && !used[k]) {
      fprintf(stderr, "stackrec privacy-manifest: %s: note: declared, not "
              "seen in this recording: %s\n", path, rc->type);
    }
  }
  return missing ? STKR_CLI_FINDINGS : 0;
}

/* path = DIR/<module, cleaned>.xcprivacy, made unique among the n paths
 * already written (QA: "Acme SDK" and "Acme_SDK" both made
 * Acme_SDK.xcprivacy, and the second silently replaced the first): a
 * second one gets "-2", and so on, with a note. */
static void draft_path(char *path, size_t cap, const char *dir,
                       const char *module, char *const *done, size_t n) {
  char base[4096], *p;
  size_t k = 0, j, room = sizeof base, dl = strlen(dir);
  const char *m;
  int w;

  /* Room for DIR, '/', "-N" and ".xcprivacy" in cap: a long module name
   * is cut, never the suffix; a DIR that leaves no room for a name is
   * the caller's to say. */
  if (cap < dl + 40) {
    path[0] = '\0';
    return;
  }
  if (cap - dl - 32 < room)
    room = cap - dl - 32;
  if (room > NAME_MAX - 24) /* a file name's own limit (QA, session 27: a
                               long module name failed to be created) */
    room = NAME_MAX - 24;
  for (m = module, p = base; *m && p < base + room - 1; m++)
    *p++ = (isalnum((unsigned char)*m) || *m == '.' || *m == '-' ||
            *m == '_') ? *m : '_';
  *p = '\0';
  /* At most n names are taken: n + 1 tries find a free one, unless the
   * path is cut at cap (then the last try is used). Compared without case:
   * macOS volumes are case-insensitive ("AcmeKit", "acmekit": review). */
  for (unsigned dup = 1; dup <= n + 1; dup++) {
    if (dup == 1)
      w = snprintf(path, cap, "%s/%s.xcprivacy", dir, base);
    else
      w = snprintf(path, cap, "%s/%s-%u.xcprivacy", dir, base, dup);
    if (w < 0 || (size_t)w >= cap)
      path[0] = '\0'; /* cannot be: room was made above */
    for (j = 0; j < n && strcasecmp(done[j], path) != 0; j++) {}
    if (j == n)
      break;
    k = dup;
  }
  if (k > 0)
    fprintf(stderr, "stackrec privacy-manifest: note: module \"%s\" is "
            "written to %s: another module's name makes the same file "
            "name\n", module, path);
}

/* --per-module DIR: a draft per module that used any category.
 * @return 0 or an exit status after a message. */
static int write_per_module(const char *dir, const stkr_comp *c,
                            const int *cat_of, bool unwatched) {
  /* The paths written so far: one per module, not per group. */
  char **done = calloc(c->n_groups + 1, sizeof *done);
  size_t i, j, n_done = 0;
  int status = 0;

  if (done == NULL) {
    fprintf(stderr, "stackrec privacy-manifest: %s\n", strerror(ENOMEM));
    return STKR_CLI_DATA_LOST;
  }
  if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
    fprintf(stderr, "stackrec privacy-manifest: cannot create %s: %s\n", dir,
            strerror(errno));
    free(done);
    return STKR_CLI_DATA_LOST;
  }
  for (i = 0; i < c->n_groups && status == 0; i++) {
    const char *m = c->groups[i].module;
    bool used[MAX_CATS] = {false}, first = true;
    char path[4096];
    FILE *f;
    int err;

    if (cat_of[i] < 0)
      continue;
    for (j = 0; j < i; j++) /* written already (with an earlier group)? */
      if (cat_of[j] >= 0 && strcmp(c->groups[j].module, m) == 0)
        first = false;
    if (!first)
      continue;
    for (j = i; j < c->n_groups; j++)
      if (cat_of[j] >= 0 && strcmp(c->groups[j].module, m) == 0)
        used[cat_of[j]] = true;
    draft_path(path, sizeof path, dir, m, done, n_done);
    if (path[0] == '\0') {
      fprintf(stderr, "stackrec privacy-manifest: --per-module %s: a path "
              "too long for the drafts' file names\n", dir);
      status = STKR_CLI_USAGE;
      break;
    }
    if ((done[n_done] = strdup(path)) == NULL) {
      fprintf(stderr, "stackrec privacy-manifest: %s\n", strerror(ENOMEM));
      status = STKR_CLI_DATA_LOST;
      break;
    }
    n_done++;
    if ((f = stkr_cli_create("privacy-manifest", path)) == NULL) {
      status = STKR_CLI_DATA_LOST;
      break;
    }
    err = write_draft(f, c, cat_of, used, m, unwatched, false);
    if (stkr_cli_close_output("privacy-manifest", path, f, err) != 0)
      status = STKR_CLI_DATA_LOST;
  }
  for (i = 0; i < n_done; i++)
    free(done[i]);
  free(done);
  return status;
}

static int parse_args(int argc, char **argv, stkr_comp_opts *o,
                      const char **manifest, const char **map,
                      const char **output, const char **per_module) {
  enum { O_MANIFEST = 256, O_MAP, O_PER_MODULE };
  const stkr_cli_opt opts[] = {
      {"per-module", O_PER_MODULE, STKR_CLI_VALUE, per_module, NULL},
      {"manifest", O_MANIFEST, STKR_CLI_VALUE, manifest, NULL},
      {"module-map", O_MAP, STKR_CLI_VALUE, map, NULL},
      {"output", 'o', STKR_CLI_SHORT | STKR_CLI_VALUE, output, NULL},
      {0}};
  stkr_cli_getopt_state gopt = {
      .cmd = "privacy-manifest", .opts = opts,
      .more_opts = stkr__filter_opts,
      .help = {help, stkr__filter_help, help_exit}};

  return stkr__filter_parse_whole_stacks(&gopt, argc, argv, &o->agg);
}

int stkr_cli_privacy_manifest(int argc, char **argv) {
  const char *manifest = NULL, *map_path = NULL, *output = NULL,
             *per_module = NULL;
  bool used[MAX_CATS], declared[MAX_CATS], reasoned[MAX_CATS];
  stkr_json *plist = NULL;
  stkr_modmap *map = NULL;
  stkr_reader *r = NULL;
  stkr_comp *c = NULL;
  stkr_comp_opts o;
  int *cat_of = NULL, status, err;
  bool unwatched = false, empty;
  char msg[512];
  FILE *f = stdout;

  memset(&o, 0, sizeof o);
  if ((status = parse_args(argc, argv, &o, &manifest, &map_path, &output,
                           &per_module)) >= 0)
    return status;
  char *opt_in[] = {(char *)manifest, (char *)map_path};
  if ((status = stkr_cli_check_output("privacy-manifest", "-o", output,
                                      argv + optind, argc - optind)) != 0 ||
      (status = stkr_cli_check_output("privacy-manifest", "-o", output,
                                      opt_in, 2)) != 0)
    return status;
  /* The inputs a person wrote first: a typo fails fast, before reading. */
  if (manifest != NULL &&
      (err = stkr_plist_load(manifest, &plist, msg, sizeof msg)) != 0)
    return stkr_cli_load_error("privacy-manifest", "manifest", msg, err);
  if (manifest != NULL &&
      (status = declared_categories(manifest, plist, declared, reasoned)) !=
          0)
    goto out;
  if (map_path != NULL &&
      (err = stkr_modmap_load(map_path, &map, msg, sizeof msg)) != 0) {
    status = stkr_cli_load_error("privacy-manifest", "module map", msg,
                                 err);
    goto out;
  }
  o.modmap = map;
  o.agg.no_site_details = true;
  if ((status = stkr_cli_open("privacy-manifest", argv + optind,
                              argc - optind, true, &r)) != 0)
    goto out;
  if ((err = stkr_comp_build(r, &o, NULL, NULL, &c)) != 0) {
    fprintf(stderr, "stackrec privacy-manifest: reading failed: %s\n",
            strerror(-err));
    status = err == -EINVAL ? STKR_CLI_USAGE : STKR_CLI_DATA_LOST;
    goto out;
  }
  /* The hook library records `reasons` only when asked (off by default):
   * a recording without it cannot show a category, and its draft and
   * check would pass empty (QA, session 26). Said, and exit 1. */
  unwatched = !stkr_comp_category_watched(c, r, STKR_REASONS_CATEGORY,
                                          strlen(STKR_REASONS_CATEGORY));
  /* No process at all: that, not "unwatched" (review, session 31). */
  empty = stkr_reader_process_count(r) == 0;
  if (empty)
    fprintf(stderr, "stackrec privacy-manifest: error: the recording holds "
            "no process: nothing was recorded (a static program the hooks "
            "cannot enter, or another directory?)\n");
  else if (unwatched)
    fprintf(stderr, "stackrec privacy-manifest: error: no process of the "
            "recording watched category " STKR_REASONS_CATEGORY " (the "
            "required-reason APIs): the draft and the manifest's check "
            "cannot list what it used (stackrec record --categories "
            "...," STKR_REASONS_CATEGORY ")\n");
  if ((cat_of = calloc(c->n_groups + 1, sizeof *cat_of)) == NULL) {
    status = STKR_CLI_DATA_LOST;
    goto out;
  }
  used_categories(c, cat_of, used);
  if ((f = stkr_cli_create("privacy-manifest", output)) == NULL) {
    status = STKR_CLI_DATA_LOST;
    goto out;
  }
  err = write_draft(f, c, cat_of, used, NULL, unwatched, empty);
  if ((status = stkr_cli_close_output("privacy-manifest", output, f, err)) != 0)
    goto out;
  /* Drafts per module of stacks never symbolized: a map's symbol
   * prefixes could not name their module, so an SDK linked into the app
   * would give its use to the app's draft (QA, session 33, as
   * compliance): none written, and exit 1. */
  if (per_module != NULL && c->unnamed > 0) {
    fprintf(stderr, "stackrec privacy-manifest: error: %llu event%s have "
            "stacks never symbolized: the module map's symbol prefixes "
            "could not name their module, so --per-module's drafts would "
            "give an SDK's use to another module; none written ('stackrec "
            "symbolize' first)\n", (unsigned long long)c->unnamed,
            c->unnamed == 1 ? "" : "s");
    status = STKR_CLI_FINDINGS;
    goto out;
  }
  if (per_module != NULL &&
      (status = write_per_module(per_module, c, cat_of, unwatched)) != 0)
    goto out;
  /* A category whose events were lost is missing from the draft and the
   * check (QA, session 22): said, never silently. */
  stkr_cli_note_left_out(r, "privacy-manifest", "the draft (and --manifest's "
                         "check)");
  status = stkr_cli_status(r);
  if ((manifest != NULL &&
       check_manifest(manifest, c, cat_of, used, declared, reasoned) != 0) ||
      unwatched)
    status = STKR_CLI_FINDINGS;
out:
  free(cat_of);
  stkr_comp_free(c);
  stkr_reader_free(r);
  stkr_json_free(plist);
  stkr_modmap_free(map);
  return status;
}
