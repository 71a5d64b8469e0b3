/*
 * report.js: the flame graphs of `stackrec report --html` pages. Embedded
 * into the binary at build time (//tools:report_assets) and run from the
 * page itself: no network, no external code.
 *
 * Input: the JSON in the page's script element #stkr-data (application/json):
 *   frames: [[label, "file:line" or "", flags, image base name or ""], ...]
 *           flags: 1 inlined call, 2 app frame, 4 no function name known,
 *                  8 Swift async resume function (an awaiting caller)
 *   sites:  [{name, count, timeline: [events per bucket, ...],
 *             stacks: [[count, frame, ...root to leaf], ...]}]
 *   events: events in the report (the denominator of "% of all").
 *   hangs:  the hang watchdog's hangs (tools/stackrec/hangs.c): [{pid, tid,
 *           thread, hang, start_ms, ms, samples, recovered, stacks}],
 *           drawn as bands over the timelines of the watchdog's sites.
 *   bucket_ns: the width of a timeline bucket (time since each process
 *           started recording, a forked child's tree's root).
 *   marks:  [[t_ns on that line, name, set with `stackrec mark`], ...]:
 *           drawn as lines on every timeline.
 * The page (written by tools/stackrec/html.c) has one div.flame with
 * data-site="i" per site, inside details#site-i.
 *
 * Each site's tree is built here from its stacks, children merged by frame
 * label (as the aggregation merges stacks) and ordered by count, widest
 * first. Only boxes at least MIN_PX wide are created, so a zoom level costs
 * a few thousand divs at most however many stacks there are. The callees
 * too narrow to draw are never dropped silently: they share one hatched
 * box "+N" (at least MORE_PX wide), and clicking it lists them, each with
 * its events, each a link that zooms to it. For privacy QA the one-off
 * call is often the finding, so every stack stays reachable.
 *
 * Search: typing in #search highlights the matching frames of every graph
 * and counts their events; submitting it shows the "sandwich" of the
 * matching functions across all sites: who calls them (callers, inverted:
 * the nearest caller first) and what they call, each merged into one tree
 * with its events (pprof's -focus and sandwich views).
 *
 * Zoom state lives in location.hash as #site-<i>/<label>/<label>... (each
 * label URI-encoded, root to the zoomed frame), so a view can be linked and
 * reloaded.
 */
(function () {
  'use strict';

  var MIN_PX = 1;     /* narrower boxes are not drawn (nor their callees) */
  var MORE_PX = 4;    /* the "+N" box of what is narrower is at least this */
  var MORE_LIST = 200; /* hidden callees listed per click */
  var TEXT_PX = 22;   /* narrower boxes get no text (it would not fit) */
  var ROW = 18;       /* px per stack level; matches --row in report.css */

  var dataEl = document.getElementById('stkr-data');
  if (!dataEl) return;
  var D = JSON.parse(dataEl.textContent);
  var F = D.frames || [];
  var TOTAL = D.events || 0;
  var graphs = [];
  var tip = document.getElementById('tip');

  function fmt(n) {
    return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  }
  function pct(part, whole) {
    if (!whole) return '0%';
    var p = 100 * part / whole;
    return (p >= 10 || p === 0 ? p.toFixed(1) : p.toPrecision(2)) + '%';
  }

  /* ---- the tree ---------------------------------------------------------- */

  function Node(name, fi, parent) {
    this.name = name;
    this.fi = fi;          /* a frame-table index (-1: the site itself) */
    this.locs = null;      /* other frame-table indexes merged in */
    this.v = 0;            /* events through this frame */
    this.self = 0;         /* events whose stack ends here */
    this.kids = [];
    this.byName = null;    /* label -> child, once there are many kids */
    this.parent = parent;
    this.depth = parent ? parent.depth + 1 : 0;
  }

  /* The child of n labelled name (frame fi), created if new. Most nodes
   * have one or two children: a scan is cheaper than a Map per node. */
  function child(n, name, fi) {
    var k = null, kids = n.kids, i;
    if (n.byName) {
      k = n.byName.get(name) || null;
    } else {
      for (i = 0; i < kids.length; i++)
        if (kids[i].name === name) { k = kids[i]; break; }
    }
    if (!k) {
      k = new Node(name, fi, n);
      kids.push(k);
      if (n.byName) {
        n.byName.set(name, k);
      } else if (kids.length > 8) {
        n.byName = new Map();
        for (i = 0; i < kids.length; i++) n.byName.set(kids[i].name, kids[i]);
      }
    } else if (k.fi !== fi && (!k.locs || k.locs.indexOf(fi) < 0)) {
      (k.locs || (k.locs = [])).push(fi);
    }
    return k;
  }

  function buildTree(site) {
    var root = new Node(site.name, -1, null), maxDepth = 0;
    var stacks = site.stacks || [], names = [];
    for (var f = 0; f < F.length; f++) names.push(F[f][0]);
    for (var s = 0; s < stacks.length; s++) {
      var st = stacks[s], c = st[0], n = root;
      root.v += c;
      for (var i = 1; i < st.length; i++) {
        var fi = st[i];
        n = child(n, fi < names.length ? names[fi] : '?', fi);
        n.v += c;
      }
      n.self += c;
      if (n.depth > maxDepth) maxDepth = n.depth;
    }
    /* Widest first; the name maps are not needed any more. */
    var todo = [root];
    while (todo.length) {
      var x = todo.pop();
      x.byName = null;
      if (x.kids.length > 1)
        x.kids.sort(function (a, b) { return b.v - a.v || (a.name < b.name ? -1 : 1); });
      for (var j = 0; j < x.kids.length; j++) todo.push(x.kids[j]);
    }
    root.maxDepth = maxDepth;
    return root;
  }

  /* ---- colours: app code warm, libraries cool, unknown grey ------------- */

  function hash(s) {
    var h = 2166136261;
    for (var i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 16777619);
    return h >>> 0;
  }
  function colour(n) {
    if (n.fi < 0) return '';
    var fl = F[n.fi] ? F[n.fi][2] : 4, h = hash(n.name), v = h % 1000 / 1000;
    if (fl & 4) return 'hsl(210,6%,' + (72 + 10 * v).toFixed(0) + '%)';
    if (fl & 2) return 'hsl(' + (8 + 42 * v).toFixed(0) + ',85%,' + (58 + 8 * (h >>> 10) % 8 / 8).toFixed(0) + '%)';
    return 'hsl(' + (185 + 40 * v).toFixed(0) + ',50%,' + (66 + 10 * ((h >>> 10) % 8) / 8).toFixed(0) + '%)';
  }

  /* ---- describing a frame (tooltip and status line) ---------------------- */

  function locOf(fi) {
    var fr = F[fi];
    return fr && fr[1] ? fr[1] : '';
  }
  function describe(g, n) {
    var site = g.root, z = g.zoom, parts = [];
    parts.push(fmt(n.v) + ' events');
    parts.push(pct(n.v, site.v) + ' of site');
    if (z !== site && n.v <= z.v && isUnder(n, z)) parts.push(pct(n.v, z.v) + ' of zoom');
    parts.push(pct(n.v, TOTAL) + ' of all');
    var d = { name: n.fi < 0 ? 'site ' + n.name : n.name, counts: parts.join(', '), extra: [] };
    if (n.self > 0 && n.kids.length) d.extra.push('self ' + fmt(n.self));
    if (n.fi >= 0) {
      /* file:line of every frame merged into this box (the same function
       * seen at other lines), the first three shown. */
      var fr = F[n.fi], all = [n.fi].concat(n.locs || []), locs = [];
      for (var i = 0; i < all.length; i++) {
        var l = locOf(all[i]);
        if (l && locs.indexOf(l) < 0) locs.push(l);
      }
      if (locs.length)
        d.extra.push(locs.slice(0, 3).join(', ') +
          (locs.length > 3 ? ' (+' + (locs.length - 3) + ' more)' : ''));
      if (fr && fr[3] && !(fr[2] & 4)) d.extra.push('in ' + fr[3]);
      if (fr && fr[2] & 1) d.extra.push('inlined');
      if (fr && fr[2] & 8) d.extra.push('async (awaiting caller)');
    }
    return d;
  }
  function isUnder(n, z) {
    for (var a = n; a; a = a.parent) if (a === z) return true;
    return false;
  }

  /* ---- one graph ------------------------------------------------------- */

  function Graph(i, el) {
    this.i = i;
    this.el = el;
    this.site = D.sites[i];
    this.root = null;
    this.zoom = null;
    this.built = false;
    var box = el.parentNode;
    this.status = box.querySelector('.status');
    this.reset = box.querySelector('button.reset');
    this.more = document.createElement('div');
    this.more.className = 'more-list';
    this.more.hidden = true;
    if (this.status && this.status.parentNode)
      this.status.parentNode.insertBefore(this.more, this.status.nextSibling);
    var g = this;
    el.addEventListener('click', function (e) {
      var t = e.target.closest ? e.target.closest('.fr') : null;
      if (t && t._more) g.showMore(t._more);
      else if (t && t._n) g.zoomTo(t._n, true);
    });
    this.more.addEventListener('click', function (e) {
      var t = e.target.closest ? e.target.closest('a') : null;
      if (t && t._n) { e.preventDefault(); g.zoomTo(t._n, true); }
      else if (t && t._page) { e.preventDefault(); t._page(); }
    });
    el.addEventListener('mousemove', function (e) {
      var t = e.target.closest ? e.target.closest('.fr') : null;
      if (t && t._n && !t._more) showTip(g, t._n, e.clientX, e.clientY); else hideTip();
    });
    el.addEventListener('mouseleave', hideTip);
    if (this.reset) this.reset.addEventListener('click', function () { g.zoomTo(g.root, true); });
  }

  Graph.prototype.build = function () {
    if (this.built) return;
    this.built = true;
    this.root = buildTree(this.site);
    this.zoom = this.root;
    this.el.style.height = (this.root.maxDepth + 1) * ROW + 2 + 'px';
  };

  /* List the callees of `m.parent` too narrow to draw (m.kids), each a
   * link that zooms to it. */
  Graph.prototype.showMore = function (m) {
    var el = this.more, ev = 0, i;
    for (i = 0; i < m.kids.length; i++) ev += m.kids[i].v;
    el.textContent = '';
    var h = document.createElement('div');
    h.textContent = m.kids.length + ' callee' + (m.kids.length === 1 ? '' : 's') +
      ' of ' + (m.parent.fi < 0 ? 'site ' : '') + m.parent.name + ' below the resolution, ' +
      fmt(ev) + ' event' + (ev === 1 ? '' : 's') + ' (click one to zoom to it):';
    el.appendChild(h);
    var ul = document.createElement('ul'), shown = 0;
    var rest = document.createElement('a');
    rest.href = '#';
    /* MORE_LIST at a time, each a link; the rest a click away, never cut
     * off (QA: 100 of 300 one-off callees could not be reached at all). */
    rest._page = function () {
      var end = Math.min(m.kids.length, shown + MORE_LIST);
      for (; shown < end; shown++) {
        var li = document.createElement('li'), a = document.createElement('a');
        a.href = '#';
        a.textContent = m.kids[shown].name;
        a._n = m.kids[shown];
        li.appendChild(a);
        li.appendChild(document.createTextNode(' \u2014 ' + fmt(m.kids[shown].v) + ' events'));
        ul.appendChild(li);
      }
      var left = m.kids.length - shown;
      rest.textContent = 'list ' + Math.min(left, MORE_LIST) + ' more (' + fmt(left) + ' not listed yet)';
      rest.hidden = left === 0;
    };
    rest._page();
    el.appendChild(ul);
    el.appendChild(rest);
    el.hidden = false;
  };

  Graph.prototype.zoomTo = function (n, updateHash) {
    this.build();
    this.zoom = n;
    if (this.more) this.more.hidden = true;
    this.render();
    if (this.reset) this.reset.hidden = n === this.root;
    this.setStatus(null);
    if (updateHash && history.replaceState) {
      var path = [];
      for (var a = n; a && a.parent; a = a.parent) path.unshift(encodeURIComponent(a.name));
      history.replaceState(null, '', '#site-' + this.i + (path.length ? '/' + path.join('/') : ''));
    }
  };

  /* The line under the graph: the hovered frame, else the zoomed one, else
   * how to use the graph. */
  Graph.prototype.setStatus = function (hovered) {
    if (!this.status) return;
    var n = hovered || (this.zoom !== this.root ? this.zoom : null);
    if (!n) {
      this.status.textContent = 'Click a frame to zoom in; click the site (top row) or press Esc to zoom out.';
      return;
    }
    var d = describe(this, n);
    this.status.textContent = (hovered ? '' : 'Zoomed to ') + d.name + ' \u2014 ' + d.counts +
      (d.extra.length ? ' \u2014 ' + d.extra.join('; ') : '');
  };

  Graph.prototype.render = function () {
    this.build();
    var W = this.el.clientWidth || 1000, z = this.zoom, frag = document.createDocumentFragment();
    var count = 0;
    /* The zoomed frame and its callers span the whole width. */
    for (var a = z; a; a = a.parent) {
      frag.appendChild(box(a, 0, 100, W, a === z ? '' : ' anc'));
      count++;
    }
    /* Its callees, scaled to it. */
    var todo = [z], xs = [0], scale = z.v ? 100 / z.v : 0;
    while (todo.length) {
      var n = todo.pop(), x = xs.pop();
      for (var k = 0; k < n.kids.length; k++) {
        var c = n.kids[k], w = c.v * scale;
        if (w * W / 100 < MIN_PX) { /* sorted widest first: the rest too */
          frag.appendChild(moreBox(n, n.kids.slice(k), x, scale, W));
          count++;
          break;
        }
        frag.appendChild(box(c, x, w, W, ''));
        count++;
        todo.push(c);
        xs.push(x);
        x += w;
      }
    }
    this.el.textContent = '';
    this.el.appendChild(frag);
    this.el.setAttribute('data-boxes', String(count));
    if (query) {
      var b = this.el.querySelectorAll('.fr');
      for (var j = 0; j < b.length; j++)
        if (b[j]._n && b[j]._n.fi >= 0 && matches(b[j]._n.name)) b[j].classList.add('hit');
    }
  };

  function box(n, leftPct, widthPct, W, cls) {
    var d = document.createElement('div'), c = colour(n);
    d.className = 'fr' + cls + (n.fi < 0 ? ' root' : '');
    /* One style string: one parse instead of four. */
    d.style.cssText = 'left:' + leftPct + '%;width:' + widthPct + '%;top:' +
      n.depth * ROW + 'px' + (c ? ';background:' + c : '');
    if (widthPct * W / 100 >= TEXT_PX) d.textContent = n.name;
    d._n = n;
    return d;
  }

  /* The callees of n too narrow to draw, as one box "+N" at least MORE_PX
   * wide (it may overlap its right neighbour by a few pixels). */
  function moreBox(n, kids, leftPct, scale, W) {
    var v = 0, d = document.createElement('div');
    for (var i = 0; i < kids.length; i++) v += kids[i].v;
    var w = Math.max(v * scale, MORE_PX * 100 / W);
    /* At the right edge (the usual place: callees come widest first), a
     * box widened to MORE_PX would be cut off by the graph's border. */
    if (leftPct + w > 100) leftPct = Math.max(0, 100 - w);
    d.className = 'fr more';
    d.style.cssText = 'left:' + leftPct + '%;width:' + w + '%;top:' +
      (n.depth + 1) * ROW + 'px';
    if (w * W / 100 >= TEXT_PX) d.textContent = '+' + kids.length;
    d.title = kids.length + ' more, ' + fmt(v) + ' events: click to list';
    d._more = { parent: n, kids: kids };
    return d;
  }

  /* ---- tooltip ----------------------------------------------------------- */

  function showTip(g, n, x, y) {
    var d = describe(g, n);
    g.setStatus(n);
    if (!tip) return;
    tip.textContent = '';
    var b = document.createElement('b');
    b.textContent = d.name;
    tip.appendChild(b);
    tip.appendChild(document.createElement('br'));
    tip.appendChild(document.createTextNode(d.counts));
    for (var i = 0; i < d.extra.length; i++) {
      var s = document.createElement('div');
      s.className = 'loc';
      s.textContent = d.extra[i];
      tip.appendChild(s);
    }
    tip.hidden = false;
    var r = tip.getBoundingClientRect();
    var left = x + 14, top = y + 16;
    if (left + r.width > window.innerWidth - 4) left = Math.max(4, x - r.width - 8);
    if (top + r.height > window.innerHeight - 4) top = Math.max(4, y - r.height - 10);
    tip.style.left = left + 'px';
    tip.style.top = top + 'px';
  }
  function hideTip() {
    if (tip) tip.hidden = true;
    for (var i = 0; i < graphs.length; i++) if (graphs[i] && graphs[i].built) graphs[i].setStatus(null);
  }

  /* ---- timelines: one bar per bucket, height scaled to the site's peak -- */

  function fmtDur(ns) {
    if (ns < 1e9) return +(ns / 1e6).toPrecision(4) + ' ms';
    if (ns < 120e9) return +(ns / 1e9).toPrecision(4) + ' s';
    return +(ns / 60e9).toPrecision(4) + ' min';
  }
  function drawTimeline(el, site) {
    var tl = site.timeline, w = D.bucket_ns || 1, peak = 0, i;
    if (!tl || !tl.length) { el.hidden = true; return; }
    for (i = 0; i < tl.length; i++) if (tl[i] > peak) peak = tl[i];
    var frag = document.createDocumentFragment();
    for (i = 0; i < tl.length; i++) {
      var b = document.createElement('div');
      b.className = 'tl-bar';
      /* Any event at all shows: at least 8% of the strip. */
      b.style.height = (tl[i] ? Math.max(8, 100 * tl[i] / peak) : 0) + '%';
      b.title = fmtDur(i * w) + '\u2013' + fmtDur((i + 1) * w) + ': ' +
        fmt(tl[i]) + ' event' + (tl[i] === 1 ? '' : 's');
      frag.appendChild(b);
    }
    /* Marks (D.marks: [t_ns, name, external]): a line each, over the bars. */
    var span = tl.length * w, ms = D.marks || [];
    for (i = 0; i < ms.length; i++) {
      if (ms[i][0] >= span) continue;
      var m = document.createElement('div');
      m.className = 'tl-mark';
      m.style.left = (100 * ms[i][0] / span) + '%';
      m.title = 'mark ' + ms[i][1] + ' at ' + fmtDur(ms[i][0]) +
        (ms[i][2] ? ' (stackrec mark)' : '');
      frag.appendChild(m);
    }
    el.appendChild(frag);
    var cap = document.createElement('div');
    cap.className = 'tl-cap';
    cap.textContent = '0\u2013' + fmtDur(tl.length * w) + ' after start, ' +
      fmtDur(w) + ' a bar, peak ' + fmt(peak) + ' (' +
      +(peak * 1e9 / w).toPrecision(4) + '/s)';
    el.appendChild(cap);
    if (/^watchdog\./.test(site.name)) drawHangs(el, tl.length * w);
  }

  /* Each hang as a band from its start to its end, over the strip (whose
   * width is span_ns); its numbers in the band's tooltip. */
  function drawHangs(el, span_ns) {
    var hs = D.hangs || [];
    for (var i = 0; i < hs.length; i++) {
      var h = hs[i], band = document.createElement('div');
      var from = h.start_ms * 1e6, len = Math.max(h.ms * 1e6, span_ns / 200);
      band.className = 'tl-hang' + (h.recovered ? '' : ' open');
      band.style.left = Math.min(100, 100 * from / span_ns) + '%';
      band.style.width = Math.min(100 - 100 * from / span_ns, 100 * len / span_ns) + '%';
      band.title = 'hang ' + h.hang + ' of thread ' + h.tid + ' (' + h.thread +
        '), pid ' + h.pid + ': ' + fmtDur(h.ms * 1e6) + (h.recovered ? '' : ' or more, not recovered') +
        ' from ' + fmtDur(from) + ', ' + fmt(h.samples) + ' samples, ' +
        h.stacks.length + ' stack' + (h.stacks.length === 1 ? '' : 's');
      el.appendChild(band);
    }
  }

  /* ---- search and sandwich ---------------------------------------------- */

  var SW_DEPTH = 8;   /* tree levels shown */
  var SW_KIDS = 10;   /* children shown per node */
  var query = '';

  function matches(name) { return query !== '' && name.indexOf(query) >= 0; }

  /* Events through frames that match, not counting a match under another
   * match twice (recursion). */
  function matchedEvents(n, under) {
    var v = 0, hit = !under && n.fi >= 0 && matches(n.name);
    if (hit) v += n.v;
    for (var k = 0; k < n.kids.length; k++) v += matchedEvents(n.kids[k], under || hit);
    return v;
  }

  function tnode(name) { return { name: name, v: 0, kids: {}, n: 0 }; }
  function tadd(t, path, c) {
    t.v += c;
    for (var i = 0; i < path.length; i++) {
      var k = t.kids[path[i]];
      if (!k) { k = t.kids[path[i]] = tnode(path[i]); t.n++; }
      k.v += c;
      t = k;
    }
  }
  /* An indented list, widest first, SW_DEPTH levels and SW_KIDS per node. */
  function renderTree(el, t, depth) {
    var kids = Object.keys(t.kids).map(function (k) { return t.kids[k]; });
    kids.sort(function (a, b) { return b.v - a.v || (a.name < b.name ? -1 : 1); });
    var ul = document.createElement('ul');
    for (var i = 0; i < kids.length && i < SW_KIDS; i++) {
      var li = document.createElement('li');
      li.textContent = kids[i].name + ' \u2014 ' + fmt(kids[i].v);
      if (depth + 1 < SW_DEPTH && kids[i].n) renderTree(li, kids[i], depth + 1);
      ul.appendChild(li);
    }
    if (kids.length > SW_KIDS) {
      var more = document.createElement('li');
      more.textContent = '... ' + (kids.length - SW_KIDS) + ' more';
      ul.appendChild(more);
    }
    el.appendChild(ul);
  }

  /* The sandwich of every frame whose name contains query: stacks are
   * root-first frame indexes; each occurrence (the outermost one in a
   * stack, so recursion counts once) splits its stack into callers and
   * callees. */
  function sandwich(el) {
    var callers = tnode(query), callees = tnode(query), total = 0, stacks = 0;
    (D.sites || []).forEach(function (site) {
      (site.stacks || []).forEach(function (st) {
        for (var i = 1; i < st.length; i++) {
          var name = F[st[i]] ? F[st[i]][0] : '?';
          if (!matches(name)) continue;
          /* Root (outermost caller) first: callers are before i, the
           * nearest one last; callees after it, then the site itself. */
          var up = [], down = [];
          for (var a = 1; a < i; a++) up.push(F[st[a]] ? F[st[a]][0] : '?');
          up.reverse();
          for (var b = i + 1; b < st.length; b++) down.push(F[st[b]] ? F[st[b]][0] : '?');
          down.push('site ' + site.name);
          tadd(callers, up, st[0]);
          tadd(callees, down, st[0]);
          total += st[0];
          stacks++;
          break;
        }
      });
    });
    el.textContent = '';
    var h = document.createElement('h3');
    h.textContent = 'Frames containing \u201c' + query + '\u201d: ' + fmt(total) +
      ' events in ' + stacks + ' stack' + (stacks === 1 ? '' : 's');
    el.appendChild(h);
    if (!stacks) { el.hidden = false; return; }
    var c1 = document.createElement('div'), c2 = document.createElement('div');
    c1.className = 'callers';
    c2.className = 'callees';
    c1.appendChild(document.createTextNode('Callers (the nearest first, out to the outermost):'));
    c2.appendChild(document.createTextNode('Callees (down to the hook site):'));
    if (callers.n) renderTree(c1, callers, 0);
    else c1.appendChild(document.createTextNode(' none (the outermost frame)'));
    renderTree(c2, callees, 0);
    el.appendChild(c1);
    el.appendChild(c2);
    el.hidden = false;
  }

  function highlight() {
    var total = 0;
    graphs.forEach(function (g) {
      if (!g.built) g.build();
      total += matchedEvents(g.root, false);
      var b = g.el.querySelectorAll('.fr');
      for (var i = 0; i < b.length; i++)
        if (b[i]._n) b[i].classList.toggle('hit', b[i]._n.fi >= 0 && matches(b[i]._n.name));
    });
    var hits = document.querySelector('#search .hits');
    if (hits) hits.textContent = query ? fmt(total) + ' events through matching frames' : '';
  }

  /* ---- start ------------------------------------------------------------- */

  /* Zoom from the location hash: #site-<i>[/<label>...]. */
  function fromHash() {
    var m = /^#site-(\d+)((?:\/[^\/]*)*)$/.exec(location.hash);
    if (!m || !graphs[+m[1]]) return;
    var g = graphs[+m[1]], det = g.el.closest('details');
    if (det && !det.open) det.open = true;
    g.build();
    var n = g.root, parts = m[2] ? m[2].split('/').slice(1) : [];
    for (var i = 0; i < parts.length; i++) {
      var name;
      try { name = decodeURIComponent(parts[i]); } catch (e) { break; }
      var next = null;
      for (var k = 0; k < n.kids.length; k++) if (n.kids[k].name === name) { next = n.kids[k]; break; }
      if (!next) break;
      n = next;
    }
    g.zoomTo(n, false);
  }

  var tls = document.querySelectorAll('.timeline[data-site]');
  for (var t = 0; t < tls.length; t++) {
    var ti = +tls[t].getAttribute('data-site');
    if (D.sites && D.sites[ti]) drawTimeline(tls[t], D.sites[ti]);
  }
  var els = document.querySelectorAll('.flame[data-site]');
  for (var i = 0; i < els.length; i++) {
    var idx = +els[i].getAttribute('data-site');
    if (D.sites && D.sites[idx]) graphs[idx] = new Graph(idx, els[i]);
  }
  graphs.forEach(function (g) {
    var det = g.el.closest('details');
    /* Closed sites are built when first opened. */
    if (!det || det.open) { g.render(); g.setStatus(null); }
    if (det) det.addEventListener('toggle', function () {
      if (det.open) { g.render(); g.setStatus(null); }
    });
  });
  fromHash();
  window.addEventListener('hashchange', fromHash);
  var form = document.getElementById('search'), sw = document.getElementById('sandwich');
  if (form && sw) {
    form.q.addEventListener('input', function () { query = form.q.value; highlight(); });
    form.addEventListener('submit', function (e) {
      e.preventDefault();
      query = form.q.value;
      highlight();
      if (query) sandwich(sw); else sw.hidden = true;
    });
  }
  document.addEventListener('keydown', function (e) {
    if (e.key !== 'Escape') return;
    graphs.forEach(function (g) { if (g.built && g.zoom !== g.root) g.zoomTo(g.root, false); });
    if (history.replaceState) history.replaceState(null, '', location.pathname + location.search);
  });
  var pending = 0;
  window.addEventListener('resize', function () {
    clearTimeout(pending);
    pending = setTimeout(function () {
      graphs.forEach(function (g) {
        var det = g.el.closest('details');
        if (g.built && (!det || det.open)) g.render();
      });
    }, 100);
  });
  document.body.setAttribute('data-rendered', String(graphs.length));
})();
