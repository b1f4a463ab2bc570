// The run browser's views, vanilla JavaScript (no library), over the globals the data files fill
// (JT.setMeta, JT.addItems, JT.addDetail; index.html): an item table filtered, sorted and paged
// over the whole items array (one pass per change, only the page's rows in the DOM, so 20,000
// items stay fast), an overview (one run: its report and figures; several: one table of their
// metrics side by side, each figure in a row with a column per run, and a link to each run's full
// report, #run=K), and an item page (#item=ID) with the frames grouped as the model saw them,
// the prompt, every run's posterior as bars and, for PhaseFusion, a table of every pass; an item's detail file is
// loaded by a <script> tag when it is opened. Copied as it is into every page folder.
'use strict';
(function () {
  var M = JT.meta, ITEMS = JT.items, R = M.runs.length;
  var INDEX = {}; ITEMS.forEach(function (it, i) { INDEX[it[0]] = i; });
  var S = {task: '', source: '', run: 0, correct: '', flipped: '', mmin: '', mmax: '', q: '',
           sort: 'id', dir: 1, page: 0, size: 50};
  var view = [];
  var main = document.getElementById('main');

  function el(tag, attrs, kids) {
    var e = document.createElement(tag);
    for (var k in attrs || {}) { if (k === 'text') e.textContent = attrs[k]; else e.setAttribute(k, attrs[k]); }
    (kids || []).forEach(function (c) {
      if (c != null) e.appendChild(typeof c === 'string' ? document.createTextNode(c) : c);
    });
    return e;
  }
  function num(x, d) { return x == null ? '–' : x.toFixed(d == null ? 3 : d); }
  function run(it) { return it[4][S.run]; }
  var KEYS = {
    id: function (it) { return it[0]; }, task: function (it) { return it[1] || ''; },
    source: function (it) { return it[2] || ''; }, gold: function (it) { return it[3] || ''; },
    pred: function (it) { var r = run(it); return r ? String(r[0]) : ''; },
    correct: function (it) { var r = run(it); return r && r[1] != null ? +r[1] : -1; },
    top: function (it) { var r = run(it); return r && r[2] != null ? r[2] : -1; },
    margin: function (it) { var r = run(it); return r && r[3] != null ? r[3] : -1; },
    flipped: function (it) { var r = run(it); return r && r[4] != null ? +r[4] : -1; }
  };
  function disagree(it) {
    var seen = {}, n = 0;
    it[4].forEach(function (r) { if (r && !seen[r[0]]) { seen[r[0]] = 1; n++; } });
    return n > 1;
  }
  function keep(it) {
    var r = run(it);
    if (S.task && it[1] !== S.task) return false;
    if (S.source && it[2] !== S.source) return false;
    if (S.q && String(it[0]).indexOf(S.q) < 0) return false;
    if (S.correct && (!r || String(!!r[1]) !== S.correct)) return false;
    if (S.flipped === 'runs') { if (!disagree(it)) return false; }
    else if (S.flipped && (!r || r[4] == null || String(!!r[4]) !== S.flipped)) return false;
    if (S.mmin !== '' && (!r || r[3] == null || r[3] < +S.mmin)) return false;
    if (S.mmax !== '' && (!r || r[3] == null || r[3] > +S.mmax)) return false;
    return true;
  }
  function apply() {
    var key = KEYS[S.sort], dir = S.dir;
    view = ITEMS.filter(keep);
    view.sort(function (a, b) { var x = key(a), y = key(b); return x < y ? -dir : x > y ? dir : 0; });
    S.page = Math.min(S.page, Math.max(0, Math.ceil(view.length / S.size) - 1));
    drawRows();
  }
  function select(id, label, options, value) {
    var s = el('select', {id: id}, options.map(function (o) {
      var opt = el('option', {value: o[0], text: o[1]}); if (String(o[0]) === String(value)) opt.selected = true; return opt;
    }));
    s.addEventListener('change', function () { S[id.slice(2)] = id === 'f-run' ? +s.value : s.value; S.page = 0; apply(); });
    return el('label', {}, [label + ' ', s]);
  }
  function input(id, label, type) {
    var i = el('input', {id: id, type: type, step: '0.01'}); i.value = S[id.slice(2)];
    i.addEventListener('input', function () { S[id.slice(2)] = i.value; S.page = 0; apply(); });
    return el('label', {}, [label + ' ', i]);
  }
  function items() {
    main.innerHTML = '';
    var all = [['', 'all']];
    var flips = all.concat([['true', 'flipped'], ['false', 'not flipped']]);
    if (R > 1) flips.push(['runs', 'runs disagree']);
    var f = el('div', {'class': 'filters'}, [
      select('f-task', 'task', all.concat(M.tasks.map(function (t) { return [t, t]; })), S.task),
      select('f-source', 'source', all.concat(M.sources.map(function (t) { return [t, t]; })), S.source),
      R > 1 ? select('f-run', 'run', M.runs.map(function (r, k) { return [k, r.name]; }), S.run) : null,
      select('f-correct', 'answer', all.concat([['true', 'correct'], ['false', 'incorrect']]), S.correct),
      select('f-flipped', 'flips', flips, S.flipped),
      input('f-mmin', 'margin ≥', 'number'), input('f-mmax', 'margin ≤', 'number'), input('f-q', 'id contains', 'text')]);
    main.appendChild(f);
    main.appendChild(el('div', {'class': 'pager', id: 'pager'}));
    var head = ['id', 'task', 'source', 'gold'];
    var tr = el('tr', {}, head.map(function (h) { return th(h, h); }));
    M.runs.forEach(function (r, k) {
      var p = R > 1 ? r.name + ' ' : '';
      ['pred', 'correct', 'top', 'margin', 'flipped'].forEach(function (h) { tr.appendChild(th(h, p + h, k)); });
    });
    main.appendChild(el('table', {'class': 'items', id: 'items'}, [el('thead', {}, [tr]), el('tbody', {id: 'rows'})]));
    apply();
  }
  function th(key, label, k) {
    var mark = S.sort === key && (k == null || k === S.run) ? (S.dir > 0 ? ' ▲' : ' ▼') : '';
    var h = el('th', {'data-sort': key, text: label + mark});
    h.addEventListener('click', function () {
      if (k != null) S.run = k;
      S.dir = S.sort === key ? -S.dir : 1; S.sort = key; items();
    });
    return h;
  }
  function drawRows() {
    var body = document.getElementById('rows'); body.innerHTML = '';
    var start = S.page * S.size, rows = view.slice(start, start + S.size);
    rows.forEach(function (it) {
      var tr = el('tr', {'class': 'row', 'data-id': it[0]}, [el('td', {text: it[0]}), el('td', {text: it[1] || ''}),
        el('td', {text: it[2] || ''}), el('td', {text: it[3] == null ? '' : it[3]})]);
      it[4].forEach(function (r) {
        if (!r) { for (var j = 0; j < 5; j++) tr.appendChild(el('td', {text: '–'})); return; }
        tr.appendChild(el('td', {text: r[0] == null ? '–' : r[0]}));
        tr.appendChild(el('td', {'class': r[1] ? 'ok' : 'bad', text: r[1] == null ? '–' : (r[1] ? '✓' : '✗')}));
        tr.appendChild(el('td', {text: num(r[2])})); tr.appendChild(el('td', {text: num(r[3])}));
        tr.appendChild(el('td', {text: r[4] == null ? '–' : (r[4] ? 'yes' : 'no')}));
      });
      tr.addEventListener('click', function () { location.hash = 'item=' + encodeURIComponent(it[0]); });
      body.appendChild(tr);
    });
    var pages = Math.max(1, Math.ceil(view.length / S.size));
    var pager = document.getElementById('pager'); pager.innerHTML = '';
    var prev = el('button', {id: 'prev', text: '‹ prev'}), next = el('button', {id: 'next', text: 'next ›'});
    prev.disabled = S.page === 0; next.disabled = S.page >= pages - 1;
    prev.addEventListener('click', function () { S.page--; drawRows(); });
    next.addEventListener('click', function () { S.page++; drawRows(); });
    pager.appendChild(prev); pager.appendChild(next);
    pager.appendChild(el('span', {id: 'count', text: 'page ' + (S.page + 1) + ' of ' + pages + ' · ' + view.length +
      ' of ' + ITEMS.length + ' items'}));
  }
  function runHead(r, k) {
    return el('p', {'class': 'run-facts'}, ['model ' + r.model + (r.adapter ? ' + adapter ' + r.adapter : '') + ' · data ' +
      r.data + (r.split ? ' [' + r.split + ']' : '') + ' · ' + r.n + ' items · folder ' + r.dir]);
  }
  function runSection(r, k) {
    var box = el('section', {'class': 'overview', 'data-run': k}, [el('h2', {text: r.name + ' (' + r.evaluation + ')'}),
      runHead(r, k)]);
    r.warnings.forEach(function (w) { box.appendChild(el('p', {'class': 'warn', text: w})); });
    var rep = el('div', {'class': 'report'}); rep.innerHTML = r.report; box.appendChild(rep);
    var shown = rep.querySelectorAll('img').length;
    var figs = r.figures.map(function (f) { return el('a', {href: f}, [el('img', {src: f})]); });
    if (!shown) box.appendChild(el('div', {'class': 'figures'}, figs));
    return box;
  }
  function compareTable(c) {
    // eval compare's table turned a quarter: a row per metric, a column per run, its Δ and p beside it
    if (c.error) return el('p', {'class': 'warn', id: 'compare-error', text: c.error});
    var head = el('tr', {}, [el('th', {text: 'metric'})].concat(c.rows.map(function (row) {
      return el('th', {'class': row.kind, 'data-kind': row.kind, 'data-run': row.run, text: row.label});
    })));
    var body = c.columns.map(function (col, j) {
      return el('tr', {'data-metric': col}, [el('th', {text: col})].concat(c.rows.map(function (row) {
        return el('td', {'class': row.kind, 'data-kind': row.kind, 'data-run': row.run, text: row.cells[j]});
      })));
    });
    return el('table', {'class': 'md compare', id: 'compare'}, [el('thead', {}, [head]), el('tbody', {}, body)]);
  }
  function figureGrid() {
    var head = el('tr', {}, [el('th', {text: 'figure'})].concat(M.runs.map(function (r) { return el('th', {text: r.name}); })));
    var rows = M.figure_names.map(function (name) {
      return el('tr', {'data-figure': name}, [el('th', {text: name})].concat(M.runs.map(function (r, k) {
        var f = r.figures.filter(function (x) { return x.split('/').pop() === name; })[0];
        return el('td', {'data-run': k}, [f ? el('a', {href: f}, [el('img', {src: f})]) : '(none)']);
      })));
    });
    return el('table', {'class': 'figgrid', id: 'figures'}, [el('thead', {}, [head]), el('tbody', {}, rows)]);
  }
  function overview() {
    main.innerHTML = '';
    if (R === 1) { main.appendChild(runSection(M.runs[0], 0)); return; }
    var box = el('section', {'class': 'overview', id: 'side-by-side'}, [el('h2', {text: R + ' runs side by side'})]);
    var list = el('ul', {'class': 'run-list'}, M.runs.map(function (r, k) {
      return el('li', {}, [el('b', {text: r.name + ' (' + r.evaluation + ') '}),
        el('a', {href: '#run=' + k, 'class': 'full-report', text: 'full report ›'}), runHead(r, k)].concat(
        r.warnings.map(function (w) { return el('p', {'class': 'warn', text: w}); })));
    }));
    box.appendChild(list);
    if (M.compare) {
      box.appendChild(el('h3', {text: 'Metrics' + (M.compare.evaluation ? ' (' + M.compare.evaluation + ')' : '')}));
      box.appendChild(compareTable(M.compare));
      (M.compare.notes || []).forEach(function (n) { box.appendChild(el('p', {'class': 'note', text: n})); });
    }
    if (M.figure_names.length) {
      box.appendChild(el('h3', {text: 'Figures, one column per run'}));
      box.appendChild(figureGrid());
    }
    main.appendChild(box);
  }
  function runPage(k) {
    main.innerHTML = '';
    if (!M.runs[k]) { main.appendChild(el('p', {text: 'no run ' + k})); return; }
    if (R > 1) main.appendChild(el('p', {}, [el('a', {href: '#overview', text: '‹ back to the runs side by side'})]));
    main.appendChild(runSection(M.runs[k], k));
  }
  function loadDetail(id, done) {
    var c = Math.floor(INDEX[id] / M.detail_chunk);
    if (JT.detail[c]) return done(JT.detail[c][id]);
    var s = document.createElement('script');
    s.src = 'data/detail-' + ('000' + c).slice(-4) + '.js';
    s.onload = function () { done(JT.detail[c][id]); };
    document.head.appendChild(s);
  }
  function frames(groups) {
    var box = el('div', {'class': 'frame-groups'});
    (groups || []).forEach(function (g) {
      var grp = el('div', {'class': 'seq-group', 'data-label': g.label}, [el('h4', {'class': 'group-title', text: g.label})]);
      if (g.note) grp.appendChild(el('p', {'class': 'note', text: g.note}));
      grp.appendChild(el('div', {'class': 'frames'}, g.thumbs.map(function (t, i) {
        return el('figure', {}, [t ? el('img', {src: t, 'class': 'thumb'}) : el('span', {text: '(missing)'}),
          el('figcaption', {text: g.captions ? g.captions[i] : 'frame ' + (i + 1)})]);
      })));
      box.appendChild(grp);
    });
    return box;
  }
  function passTable(x) {
    var origins = {}; x.passes.forEach(function (p) { origins[p.origin] = 1; });
    var several = Object.keys(origins).length > 1;
    var letters = x.choices.map(function (c) { return c.split('.')[0]; });
    var head = (several ? ['origin'] : []).concat(['grid', 'phase', 'ordering', 'options shown as', 'frames', 'answer'])
      .concat(letters.map(function (l) { return 'P(' + l + ')'; }));
    var rows = x.passes.map(function (p) {
      var cells = (several ? [p.origin] : []).concat([p.grid, String(p.phase), String(p.ordering), p.shown, p.times,
        letters[p.pred] || String(p.pred)]).concat(p.posterior.map(function (q) { return q.toFixed(3); }));
      return el('tr', {'class': p.main ? 'main' : ''}, cells.map(function (c) { return el('td', {text: c}); }));
    });
    return el('table', {'class': 'md passes'}, [el('thead', {}, [el('tr', {}, head.map(function (h) {
      return el('th', {text: h}); }))]), el('tbody', {}, rows)]);
  }
  function bars(choices, probs, pred, gold) {
    return el('div', {'class': 'bars'}, choices.map(function (c, i) {
      var p = probs ? probs[i] : null;
      var cls = 'bar' + (c === pred ? ' pred' : '') + (c === gold ? ' gold' : '');
      return el('div', {'class': cls, 'data-choice': c, 'data-p': p == null ? '' : String(p)}, [
        el('span', {'class': 'label', text: c + (c === gold ? ' ★ gold' : '') + (c === pred ? ' ◀ predicted' : '')}),
        el('div', {'class': 'track'}, [el('div', {'class': 'fill', style: 'width:' + (p == null ? 0 : 100 * p) + '%'})]),
        el('span', {'class': 'value', text: p == null ? '–' : p.toFixed(4)})]);
    }));
  }
  function item(id) {
    main.innerHTML = '';
    if (!(id in INDEX)) { main.appendChild(el('p', {text: 'no item ' + id})); return; }
    var it = ITEMS[INDEX[id]];
    main.appendChild(el('p', {}, [el('a', {href: '#items', text: '‹ back to the items'})]));
    main.appendChild(el('h2', {id: 'item-id', text: id}));
    main.appendChild(el('p', {text: 'task ' + it[1] + ' · source ' + it[2] + ' · gold ' + it[3]}));
    loadDetail(id, function (d) {
      var same = d.every(function (x) { return !x || JSON.stringify(x.frames) === JSON.stringify(d[0] && d[0].frames); });
      if (same && d[0]) {
        main.appendChild(el('h3', {text: 'Frames, in the order the model saw them'}));
        if (d[0].frames_note) main.appendChild(el('p', {'class': 'note', id: 'frames-note', text: d[0].frames_note}));
        main.appendChild(frames(d[0].frames));
      }
      var cols = el('div', {'class': 'runs'});
      d.forEach(function (x, k) {
        var box = el('div', {'class': 'run', 'data-run': k}, [el('h3', {text: M.runs[k].name})]);
        if (!x) { box.appendChild(el('p', {text: 'not in this run'})); cols.appendChild(box); return; }
        if (!same) {
          if (x.frames_note) box.appendChild(el('p', {'class': 'note', text: x.frames_note}));
          box.appendChild(frames(x.frames));
        }
        box.appendChild(el('p', {text: 'prediction ' + x.pred + ' · ' + (x.correct ? 'correct' : 'incorrect')}));
        if (x.main) box.appendChild(el('p', {'class': 'main-posterior', text: 'Posterior shown: ' + x.main}));
        box.appendChild(bars(x.choices, x.probs, x.pred, x.gold));
        if ((x.passes || []).length) {
          box.appendChild(el('h4', {text: 'All ' + x.passes.length + ' passes (bold: the ones the posterior above reads)'}));
          box.appendChild(passTable(x));
        }
        box.appendChild(el('h4', {text: x.prompt_kind === 'messages' ?
          'Prompt (messages; the run stored no rendered prompt)' : 'Prompt as rendered'}));
        box.appendChild(el('pre', {'class': 'prompt', text: x.prompt == null ? '(not stored)' : x.prompt}));
        Object.keys(x.extra || {}).forEach(function (k2) { box.appendChild(el('div', {text: k2 + ': ' + x.extra[k2]})); });
        cols.appendChild(box);
      });
      main.appendChild(cols);
      main.setAttribute('data-ready', id);
    });
  }
  function route() {
    var h = decodeURIComponent(location.hash.slice(1));
    main.removeAttribute('data-ready');
    if (h.indexOf('item=') === 0) item(h.slice(5));
    else if (h.indexOf('run=') === 0) runPage(+h.slice(4));
    else if (h === 'overview') overview();
    else items();
  }
  window.addEventListener('hashchange', route);
  route();
})();
