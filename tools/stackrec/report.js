/*
 * report.js: the flame graphs of `stackrec report --html` pages. Embedded
 * into the binary at build time (//tools:report_assets) and run from the
 * page itself: no network, no external code.
 *
 * Input: the JSON in the page's script element #stkr-data (application/json):
 *   frames: [[label, "file:line" or "", flags, image base name or ""], ...]
 *           flags: 1 inlined call, 2 app frame, 4 no function name known,
 *                  8 Swift async resume function (an awaiting caller)
 *   sites:  [{name, count, stacks: [[count, frame, ...root to leaf], ...]}]
 *   events: events in the report (the denominator of "% of all").
 * The page (written by tools/stackrec/html.c) has one div.flame with
 * data-site="i" per site, inside details#site-i.
 *
 * Each site's tree is built here from its stacks, children merged by frame
 * label (as the aggregation merges stacks) and ordered by count, widest
 * first. Only boxes at least MIN_PX wide are created, so a zoom level costs
 * a few thousand divs at most however many stacks there are.
 *
 * Zoom state lives in location.hash as #site-<i>/<label>/<label>... (each
 * label URI-encoded, root to the zoomed frame), so a view can be linked and
 * reloaded.
 */
(function () {
  'use strict';

  var MIN_PX = 1;     /* narrower boxes are not drawn (nor their callees) */
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
    var g = this;
    el.addEventListener('click', function (e) {
      var t = e.target.closest ? e.target.closest('.fr') : null;
      if (t && t._n) g.zoomTo(t._n, true);
    });
    el.addEventListener('mousemove', function (e) {
      var t = e.target.closest ? e.target.closest('.fr') : null;
      if (t && t._n) showTip(g, t._n, e.clientX, e.clientY); else hideTip();
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

  Graph.prototype.zoomTo = function (n, updateHash) {
    this.build();
    this.zoom = n;
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
        if (w * W / 100 < MIN_PX) break; /* sorted widest first */
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
