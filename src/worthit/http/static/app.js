// The shopper's page: search, a verdict at once, the explanation as it is written.
//
// No framework and no build step: the page is small, and every millisecond between the
// `verdict` event and pixels on screen is ours to account for. Contract with the server:
//   GET  /v1/products?q=&limit=8           autocomplete
//   GET  /v1/products/{sku}/facts          fact sheet + verdict (ETag, 304)
//   GET  /v1/products/{sku}/history?days=  price points for the chart
//   POST /v1/decide  (Accept: text/event-stream)  verdict → token* → done | error
//   POST /v1/watches, GET /v1/watches/events (fetch stream)  "tell me when" on a WAIT card
"use strict";

(() => {
  // ---------------------------------------------------------------- strings --
  // Every piece of UI text, in each language. Server-written text (reasons,
  // explanation) arrives already in the question's language.
  const STRINGS = {
    en: {
      skip: "Skip to the answer",
      tagline: "Grounded in price history, not hype.",
      label: "Which product are you thinking of buying?",
      placeholder: "Is the Aurora NC700 worth buying?",
      hint: "Type a product or a question, in English, Chinese or Japanese. ↑↓ to choose, Enter to ask.",
      ask: "Ask",
      suggestions: "Matching products",
      answer: "Answer",
      ambiguous: "Which one did you mean?",
      why: "Why",
      chart: (days) => days == null ? "Price history" : days <= 1 ? "Price, one day" : `Price, ${days} days`,
      price: "price",
      avg90: "90-day average",
      atl: "all-time low",
      timings: "How fast this answer was",
      footer:
        "Verdicts come from fixed rules over recorded prices, ratings and stock. " +
        "The explanation is written afterwards and checked against the same numbers.",
      retry: "Try again",
      langButton: "中文",
      ranking: "Top picks",
      confidence: (p) => `${p}% confident`,
      numPrice: "Price now",
      numLow: "All-time low",
      numAvg: "90-day avg",
      numRating: "Rating",
      ratingValue: (r, n) => `${r}/5 (${n})`,
      noReviews: "no reviews yet",
      dataAge: (age) => `Prices as of ${age}`,
      version: (v) => `facts ${v}`,
      ago: { now: "just now", min: (m) => `${m} min ago`, hour: (h, m) => `${h} h ${m} min ago`, day: (d) => `${d} days ago` },
      question: (title) => `Is the ${title} worth buying?`,
      checking: "Checking prices and reviews…",
      writing: "Writing the explanation…",
      preview: "From the facts fetched while you were choosing; the live answer is on its way.",
      offlineAsk: "Can't reach worthit right now.",
      offlineSaved: (age) => `Showing the last verdict this device received, ${age}. It may be out of date.`,
      offlineNothing: "There is no saved verdict for this product on this device yet.",
      offlineBanner: "You're offline or the worthit server can't be reached.",
      lostMidway: "The connection dropped before the explanation finished.",
      savedAt: (age, source) => `${source === "prefetch" ? "Prefetched" : "Answered"} ${age}; not live.`,
      sourceLlm: "Written by the model and checked against the facts above.",
      sourceTemplate: "Standard wording built from the facts above.",
      stages: "Server stages (ms)",
      browser: "In your browser",
      watchAsk: "Tell me when it's worth buying",
      watchOpen: "See the verdict",
      watchArmed: "We’ll tell you here when it’s worth buying (keep this page open).",
      watchFailed: "Couldn't set that up; try again.",
      watchFired: (title, label, price) => `${title}: ${label}${price ? ` at ${price}` : ""}.`,
      toVerdict: "verdict shown",
      toFirstToken: "first words",
      toDone: "complete",
      tokens: (n) => `${n} tokens generated`,
      notFound: (what) => `No product found for “${what}”.`,
      didYouMean: "Did you mean one of these?",
      rateLimited: (s) => `Too many questions right now; try again in ${s} s.`,
      keyLabel: "This service needs an API key",
      keyUse: "Use key",
      keyHint: "Kept in this browser only, and sent with each question.",
      keyNeeded: "Enter an API key above to ask.",
      keyRefused: "That API key was refused; enter another above.",
      problem: "Something went wrong",
      noHistory: "No price history yet.",
      chartLabel: (low, lowAt, avg) =>
        `Price history. All-time low ${low}${lowAt ? ` on ${lowAt}` : ""}; 90-day average ${avg}.`,
      lowLabel: (p) => `low ${p}`,
      avgLabel: (p) => `90-day avg ${p}`,
      noResults: "No matching products",
    },
    zh: {
      skip: "跳到答案",
      tagline: "只看历史价格和真实评价，不看噱头。",
      label: "你在考虑买哪件商品？",
      placeholder: "极光NC700值不值得买？",
      hint: "输入商品名或问题，中文、英文、日文都可以。↑↓ 选择，回车提问。",
      ask: "提问",
      suggestions: "匹配的商品",
      answer: "答案",
      ambiguous: "你指的是哪一个？",
      why: "理由",
      chart: (days) => days == null ? "价格走势" : `${Math.max(1, days)}天价格走势`,
      price: "价格",
      avg90: "90天均价",
      atl: "历史最低价",
      timings: "这次回答用了多久",
      footer: "结论由固定规则根据记录的价格、评分和库存得出；说明随后生成，并用同样的数字核对。",
      retry: "重试",
      langButton: "日本語",
      ranking: "排行榜",
      confidence: (p) => `把握 ${p}%`,
      numPrice: "当前价",
      numLow: "历史最低",
      numAvg: "90天均价",
      numRating: "评分",
      ratingValue: (r, n) => `${r}/5（${n}条）`,
      noReviews: "暂无评价",
      dataAge: (age) => `价格数据更新于${age}`,
      version: (v) => `数据版本 ${v}`,
      ago: { now: "刚刚", min: (m) => `${m}分钟前`, hour: (h, m) => `${h}小时${m}分钟前`, day: (d) => `${d}天前` },
      question: (title) => `${title}值得买吗？`,
      checking: "正在核对价格和评价…",
      writing: "正在生成说明…",
      preview: "这是你选择时预先取到的数据，实时答案马上就到。",
      offlineAsk: "暂时连不上 worthit。",
      offlineSaved: (age) => `下面是本设备上次收到的结论（${age}），可能已经过时。`,
      offlineNothing: "本设备还没有保存过这件商品的结论。",
      offlineBanner: "网络已断开，或连不上 worthit 服务器。",
      lostMidway: "说明还没写完，连接就断了。",
      savedAt: (age, source) => `${source === "prefetch" ? "预取" : "回答"}于${age}，非实时数据。`,
      sourceLlm: "由模型撰写，并已与上面的数字逐一核对。",
      sourceTemplate: "根据上面的数据生成的标准说明。",
      stages: "服务器各阶段（毫秒）",
      browser: "在你的浏览器里",
      watchAsk: "值得买时提醒我",
      watchOpen: "查看结论",
      watchArmed: "值得买时会在这里提醒你（请保持页面打开）。",
      watchFailed: "没能设置提醒，请再试一次。",
      watchFired: (title, label, price) => `${title}：${label}${price ? `，现价 ${price}` : ""}。`,
      toVerdict: "显示结论",
      toFirstToken: "第一个字",
      toDone: "全部完成",
      tokens: (n) => `生成了 ${n} 个词元`,
      notFound: (what) => `没有找到“${what}”。`,
      didYouMean: "你是不是想找：",
      rateLimited: (s) => `提问太频繁，请 ${s} 秒后再试。`,
      keyLabel: "此服务需要 API 密钥",
      keyUse: "使用密钥",
      keyHint: "只保存在此浏览器中，随每个问题发送。",
      keyNeeded: "请在上方输入 API 密钥后再提问。",
      keyRefused: "此 API 密钥被拒绝，请在上方输入另一个。",
      problem: "出错了",
      noHistory: "还没有价格记录。",
      chartLabel: (low, lowAt, avg) =>
        `价格走势。历史最低价 ${low}${lowAt ? `（${lowAt}）` : ""}；90天均价 ${avg}。`,
      lowLabel: (p) => `最低 ${p}`,
      avgLabel: (p) => `90天均价 ${p}`,
      noResults: "没有匹配的商品",
    },
    ja: {
      skip: "回答へ移動",
      tagline: "宣伝ではなく、価格の履歴と本当の評価で判断します。",
      label: "どの商品の購入を考えていますか？",
      placeholder: "Aurora NC700は買い時ですか？",
      hint: "商品名か質問を、日本語・英語・中国語で入力してください。↑↓で選択、Enterで質問。",
      ask: "質問する",
      suggestions: "一致する商品",
      answer: "回答",
      ambiguous: "どの商品のことですか？",
      why: "理由",
      chart: (days) => days == null ? "価格の推移" : `${Math.max(1, days)}日間の価格`,
      price: "価格",
      avg90: "90日平均",
      atl: "過去最安値",
      timings: "この回答にかかった時間",
      footer: "判定は記録された価格・評価・在庫から決まったルールで出しています。説明はその後に書かれ、同じ数字で確認されます。",
      retry: "もう一度",
      langButton: "English",
      ranking: "おすすめ",
      confidence: (p) => `確度 ${p}%`,
      numPrice: "現在の価格",
      numLow: "過去最安値",
      numAvg: "90日平均",
      numRating: "評価",
      ratingValue: (r, n) => `${r}/5（${n}件）`,
      noReviews: "レビューはまだありません",
      dataAge: (age) => `価格データ：${age}`,
      version: (v) => `データ版 ${v}`,
      ago: { now: "たった今", min: (m) => `${m}分前`, hour: (h, m) => `${h}時間${m}分前`, day: (d) => `${d}日前` },
      question: (title) => `${title}は買うべきですか？`,
      checking: "価格と評価を確認しています…",
      writing: "説明を書いています…",
      preview: "選んでいる間に取得したデータです。最新の回答はまもなく届きます。",
      offlineAsk: "今は worthit に接続できません。",
      offlineSaved: (age) => `この端末が最後に受け取った判定（${age}）を表示しています。古い可能性があります。`,
      offlineNothing: "この端末にはこの商品の判定がまだ保存されていません。",
      offlineBanner: "オフラインか、worthit サーバーに接続できません。",
      lostMidway: "説明が終わる前に接続が切れました。",
      savedAt: (age, source) => `${source === "prefetch" ? "事前取得" : "回答"}：${age}（リアルタイムではありません）。`,
      sourceLlm: "モデルが書き、上の数字と照合済みです。",
      sourceTemplate: "上のデータから作った定型の説明です。",
      stages: "サーバーの各段階（ミリ秒）",
      browser: "ブラウザ内",
      watchAsk: "買い時になったら知らせる",
      watchOpen: "判定を見る",
      watchArmed: "買い時になったらここでお知らせします（このページを開いたままにしてください）。",
      watchFailed: "設定できませんでした。もう一度お試しください。",
      watchFired: (title, label, price) => `${title}：${label}${price ? `（${price}）` : ""}。`,
      toVerdict: "判定を表示",
      toFirstToken: "最初の言葉",
      toDone: "完了",
      tokens: (n) => `${n}トークン生成`,
      notFound: (what) => `「${what}」に一致する商品はありません。`,
      didYouMean: "こちらの商品ですか？",
      rateLimited: (s) => `質問が多すぎます。${s}秒後にもう一度お試しください。`,
      keyLabel: "このサービスには API キーが必要です",
      keyUse: "キーを使う",
      keyHint: "このブラウザだけに保存され、質問ごとに送信されます。",
      keyNeeded: "質問するには上で API キーを入力してください。",
      keyRefused: "この API キーは拒否されました。上で別のキーを入力してください。",
      problem: "問題が発生しました",
      noHistory: "価格の記録はまだありません。",
      chartLabel: (low, lowAt, avg) =>
        `価格の推移。過去最安値 ${low}${lowAt ? `（${lowAt}）` : ""}、90日平均 ${avg}。`,
      lowLabel: (p) => `最安 ${p}`,
      avgLabel: (p) => `90日平均 ${p}`,
      noResults: "一致する商品はありません",
    },
  };

  const LANGS = ["en", "zh", "ja"]; // the language button goes round them in this order
  const LOCALES = { en: "en", zh: "zh-CN", ja: "ja-JP" };
  const SUGGEST_LIMIT = 8;
  const SUGGEST_DEBOUNCE_MS = 120;
  const PREFETCH_DEBOUNCE_MS = 60;
  const FRESH_MS = 60_000; // reuse a prefetched fact sheet this long without asking again
  // The engine's admission estimate and budget: evidence for developers (done.timings_ms),
  // not stages of the shopper's answer, and an estimate of seconds dwarfs a 30 ms answer.
  const ENGINE_INTERNALS = new Set(["llm_estimate", "llm_budget"]);
  const CONNECT_TIMEOUT_MS = 8_000; // no response headers by then: treat as unreachable
  const REQUEST_TIMEOUT_MS = 5_000;
  const SAVED_MAX = 40; // products whose last verdict this device keeps
  const CATALOG_MAX = 300; // products remembered for offline suggestions
  const STORE = "worthit.";
  const WATCH_STREAM = "watch-"; // the worker's stream ids of the watch connections
  const WATCH_RETRY_MS = 1_000; // the first reconnect; doubling, with jitter
  const WATCH_RETRY_MAX_MS = 30_000;
  const WATCH_SILENT_MS = 45_000; // three of the server's 15 s keep-alives missed

  const $ = (id) => document.getElementById(id);
  const el = {
    q: $("q"),
    form: $("ask"),
    suggestions: $("suggestions"),
    lang: $("lang"),
    offline: $("offline"),
    offlineText: $("offline-text"),
    retry: $("retry"),
    answer: $("answer"),
    status: $("status"),
    candidates: $("candidates"),
    verdict: $("verdict"),
    title: $("v-title"),
    sku: $("v-sku"),
    word: $("v-word"),
    confidence: $("v-confidence"),
    numbers: $("v-numbers"),
    stale: $("v-stale"),
    reasons: $("v-reasons"),
    dataAge: $("data-age"),
    version: $("v-version"),
    explanation: $("explanation"),
    source: $("source"),
    chart: $("chart-body"),
    timings: $("timings"),
    timingsCard: $("timings-card"),
    explainCard: $("explain-card"),
    chartCard: $("chart"),
    chartTitle: $("chart-title"),
    watch: $("watch"),
    watchButton: $("watch-button"),
    watchStatus: $("watch-status"),
    watchNotice: $("watch-notice"),
    watchNoticeText: $("watch-notice-text"),
    watchNoticeOpen: $("watch-notice-open"),
    keyForm: $("key-form"),
    key: $("key"),
  };
  for (const name of ["q", "suggestions", "verdict", "explanation", "timings", "data-age", "offline"]) {
    $(name).dataset.testid = name;
  }
  $("chart").dataset.testid = "chart";

  // ------------------------------------------------------------------ state --
  const state = {
    lang: load("lang") || (LANGS.find((l) => (navigator.language || "en").toLowerCase().startsWith(l)) || "en"),
    items: [], // current suggestions
    active: -1, // highlighted suggestion
    suggestSeq: 0,
    facts: new Map(), // sku → {etag, body, at}
    factsInFlight: new Map(), // sku → Promise
    history: new Map(), // sku → {body, at}
    stream: null, // {id, controller, sku, question, t0, ...}
    streamSeq: 0,
    lastShown: null, // what the card shows, to re-render on a language switch
    lastChart: null, // the history the chart shows, likewise
    lastTimings: null, // [stream, done] the timings show, likewise
  };

  // ----------------------------------------------------------------- i18n --
  function t(key, ...args) {
    const value = STRINGS[state.lang][key];
    return typeof value === "function" ? value(...args) : value;
  }

  function setLang(lang, remember) {
    if (!LANGS.includes(lang)) return;
    state.lang = lang;
    if (remember) save("lang", lang);
    document.documentElement.lang = LOCALES[lang];
    for (const node of document.querySelectorAll("[data-i18n]")) {
      node.textContent = t(node.dataset.i18n);
    }
    for (const node of document.querySelectorAll("[data-i18n-label]")) {
      node.setAttribute("aria-label", t(node.dataset.i18nLabel));
    }
    el.q.placeholder = t("placeholder");
    el.lang.textContent = t("langButton");
    if (state.lastShown) renderVerdict(state.lastShown.data, state.lastShown.how);
    if (state.lastChart) renderChart(state.lastChart);
    if (state.lastTimings) renderTimings(...state.lastTimings);
    if (!el.offline.hidden) el.offlineText.textContent = t("offlineBanner");
  }

  function questionLang(text) {
    if (/[\u3041-\u3096\u30a1-\u30fa]/.test(text)) return "ja"; // kana: Chinese has none
    if (/[\u3400-\u9fff\uf900-\ufaff]/.test(text)) return "zh";
    if (/[a-z]{3,}/i.test(text)) return "en";
    return state.lang;
  }

  // ---------------------------------------------------------------- storage --
  function load(key) {
    try {
      const raw = localStorage.getItem(STORE + key);
      return raw === null ? null : JSON.parse(raw);
    } catch (_) {
      return null;
    }
  }

  function save(key, value) {
    try {
      localStorage.setItem(STORE + key, JSON.stringify(value));
    } catch (_) {
      // full or disabled (private mode): the page works without it
    }
  }

  function forget(key) {
    try {
      localStorage.removeItem(STORE + key);
    } catch (_) {}
  }

  // The last verdict per product, live ("answer") or prefetched, for when the server is
  // unreachable. A small most-recent-first index bounds what the device keeps.
  function saveVerdict(data, source, extra) {
    if (!data || !data.sku) return;
    const previous = load("v." + data.sku);
    if (source === "prefetch" && previous && previous.source === "answer" &&
        previous.data.facts_version === data.facts_version) {
      return; // a live answer with its explanation beats a prefetch of the same facts
    }
    save("v." + data.sku, { savedAt: Date.now(), source, data, ...(extra || {}) });
    const index = (load("index") || []).filter((sku) => sku !== data.sku);
    index.unshift(data.sku);
    for (const evicted of index.splice(SAVED_MAX)) {
      forget("v." + evicted);
      forget("h." + evicted);
    }
    save("index", index);
  }

  function rememberProducts(items) {
    const catalog = load("catalog") || {};
    for (const item of items) {
      const old = catalog[item.sku] || {};
      const aliases = item.aliases && item.aliases.length ? item.aliases : old.aliases || [];
      catalog[item.sku] = { ...old, ...item, aliases, seen: Date.now() };
    }
    const skus = Object.keys(catalog);
    if (skus.length > CATALOG_MAX) {
      skus.sort((a, b) => catalog[a].seen - catalog[b].seen);
      for (const sku of skus.slice(0, skus.length - CATALOG_MAX)) delete catalog[sku];
    }
    save("catalog", catalog);
  }

  function rememberQuestion(question, sku) {
    const asked = load("asked") || {};
    delete asked[normalize(question)];
    asked[normalize(question)] = sku;
    const keys = Object.keys(asked); // insertion order: oldest first
    for (const old of keys.slice(0, Math.max(0, keys.length - CATALOG_MAX))) delete asked[old];
    save("asked", asked);
  }

  function normalize(question) {
    return question.toLowerCase().replace(/[\s?？!！。.,，]+/g, " ").trim();
  }

  // Offline, a free question is matched to a product: the same question asked before,
  // else the product this device has seen whose title and aliases it mentions most.
  function guessSku(question) {
    const known = (load("asked") || {})[normalize(question)];
    if (known) return known;
    const text = question.toLowerCase();
    let best = null;
    let bestScore = 0;
    for (const item of Object.values(load("catalog") || {})) {
      let score = 0;
      for (const alias of item.aliases || []) {
        if (alias && text.includes(alias.toLowerCase())) score += 3;
      }
      for (const word of (item.title || "").toLowerCase().split(/\s+/)) {
        if (word.length >= 3 && text.includes(word)) score += /\d/.test(word) ? 2 : 1;
      }
      if (score > bestScore) {
        best = item.sku;
        bestScore = score;
      }
    }
    return bestScore >= 2 ? best : null;
  }

  // ---------------------------------------------------------------- network --
  class Unreachable extends Error {}

  class Problem extends Error {
    constructor(status, body) {
      super((body && (body.detail || body.title)) || `HTTP ${status}`);
      this.status = status;
      this.body = body || {};
    }
  }

  function headers(extra) {
    const h = { ...extra };
    const key = load("apiKey"); // only when the server runs with auth on
    if (key) h.Authorization = `Bearer ${key}`;
    return h;
  }

  // fetch that fails as Unreachable (network down, server gone, gateway errors, no answer
  // in time) and as Problem (any other non-2xx), so callers can tell the two apart.
  async function request(url, options = {}, timeoutMs = REQUEST_TIMEOUT_MS) {
    const controller = new AbortController();
    const outer = options.signal;
    if (outer) {
      if (outer.aborted) controller.abort();
      outer.addEventListener("abort", () => controller.abort(), { once: true });
    }
    const timer = setTimeout(() => controller.abort(new Unreachable("timeout")), timeoutMs);
    let response;
    try {
      response = await fetch(url, { ...options, headers: headers(options.headers), signal: controller.signal });
    } catch (error) {
      if (outer && outer.aborted) throw error; // the caller cancelled: not an outage
      throw new Unreachable(String(error && error.message));
    } finally {
      clearTimeout(timer);
    }
    if (response.status === 502 || response.status === 504 || (response.status === 503 && !isJson(response))) {
      throw new Unreachable(`HTTP ${response.status}`);
    }
    setOnline(true);
    return response;
  }

  function isJson(response) {
    return /json/.test(response.headers.get("content-type") || "");
  }

  async function problemOf(response) {
    let body = null;
    try {
      body = isJson(response) ? await response.json() : { title: await response.text() };
    } catch (_) {}
    return new Problem(response.status, body);
  }

  function setOnline(online) {
    el.offline.hidden = online;
    if (!online) el.offlineText.textContent = t("offlineBanner");
  }

  // ------------------------------------------------------------ autocomplete --
  let suggestTimer = 0;

  el.q.addEventListener("input", () => {
    clearTimeout(suggestTimer);
    const text = el.q.value.trim();
    if (!text) {
      closeSuggestions();
      return;
    }
    suggestTimer = setTimeout(() => suggest(text), SUGGEST_DEBOUNCE_MS);
  });

  async function suggest(text) {
    const seq = ++state.suggestSeq;
    let items;
    try {
      const response = await request(`/v1/products?q=${encodeURIComponent(text)}&limit=${SUGGEST_LIMIT}`);
      if (!response.ok) throw await problemOf(response);
      items = (await response.json()).items || [];
      rememberProducts(items);
    } catch (error) {
      if (!(error instanceof Unreachable)) {
        if (isKeyProblem(error)) askForKey(false);
        return;
      }
      setOnline(false);
      items = offlineSuggestions(text);
    }
    if (seq !== state.suggestSeq || el.q.value.trim() !== text) return; // typed on since
    showSuggestions(items);
  }

  function offlineSuggestions(text) {
    const needle = text.toLowerCase();
    return Object.values(load("catalog") || {})
      .filter((item) =>
        [item.title, item.brand, ...(item.aliases || [])].some((s) => s && s.toLowerCase().includes(needle)) ||
        needle.split(/\s+/).every((w) => (item.title || "").toLowerCase().includes(w)))
      .slice(0, SUGGEST_LIMIT);
  }

  function showSuggestions(items) {
    state.items = items;
    state.active = -1;
    el.suggestions.replaceChildren();
    if (!items.length) {
      closeSuggestions();
      return;
    }
    items.forEach((item, i) => {
      const li = document.createElement("li");
      li.id = `sug-${i}`;
      li.setAttribute("role", "option");
      li.setAttribute("aria-selected", "false");
      li.dataset.sku = item.sku;
      li.dataset.testid = "suggestion";
      const title = document.createElement("span");
      title.className = "s-title";
      title.textContent = item.title;
      const alias = (item.aliases || []).find((a) => questionLang(a) === "zh");
      const meta = document.createElement("span");
      meta.className = "s-meta";
      meta.textContent = [state.lang === "zh" && alias, item.brand, item.category, item.sku]
        .filter(Boolean).join(" · ");
      li.append(title, meta);
      li.addEventListener("mousemove", () => highlight(i));
      li.addEventListener("mousedown", (event) => event.preventDefault()); // keep focus in #q
      li.addEventListener("click", () => pick(i));
      el.suggestions.append(li);
    });
    el.suggestions.hidden = false;
    el.q.setAttribute("aria-expanded", "true");
  }

  function closeSuggestions() {
    state.suggestSeq++;
    state.items = [];
    state.active = -1;
    el.suggestions.hidden = true;
    el.suggestions.replaceChildren();
    el.q.setAttribute("aria-expanded", "false");
    el.q.removeAttribute("aria-activedescendant");
  }

  function highlight(i) {
    if (i === state.active || i < -1 || i >= state.items.length) return;
    const nodes = el.suggestions.children;
    if (state.active >= 0 && nodes[state.active]) nodes[state.active].setAttribute("aria-selected", "false");
    state.active = i;
    if (i < 0) {
      el.q.removeAttribute("aria-activedescendant");
      return;
    }
    nodes[i].setAttribute("aria-selected", "true");
    nodes[i].scrollIntoView({ block: "nearest" });
    el.q.setAttribute("aria-activedescendant", nodes[i].id);
    schedulePrefetch(state.items[i].sku);
  }

  el.q.addEventListener("keydown", (event) => {
    const open = !el.suggestions.hidden;
    if (event.key === "ArrowDown" && open) {
      event.preventDefault();
      highlight(Math.min(state.active + 1, state.items.length - 1));
    } else if (event.key === "ArrowUp" && open) {
      event.preventDefault();
      highlight(Math.max(state.active - 1, -1));
    } else if (event.key === "Escape" && open) {
      event.preventDefault();
      closeSuggestions();
    }
  });

  el.q.addEventListener("blur", () => setTimeout(closeSuggestions, 150));

  el.form.addEventListener("submit", (event) => {
    event.preventDefault();
    clearTimeout(suggestTimer);
    if (state.active >= 0) {
      pick(state.active);
      return;
    }
    const question = el.q.value.trim();
    if (!question) return;
    closeSuggestions();
    ask(question, null);
  });

  function pick(i) {
    const item = state.items[i];
    if (!item) return;
    const typed = el.q.value.trim();
    closeSuggestions();
    const lang = questionLang(typed);
    const isQuestion = /[?？]|worth|should|wait|buy|sale|值|买|等/i.test(typed);
    const question = isQuestion ? typed : STRINGS[lang].question(item.title);
    el.q.value = question;
    ask(question, item.sku);
  }

  // -------------------------------------------------------------- prefetch --
  let prefetchTimer = 0;

  function schedulePrefetch(sku) {
    clearTimeout(prefetchTimer);
    const lang = questionLang(el.q.value.trim()); // the language the question will be in
    prefetchTimer = setTimeout(() => prefetchFacts(sku, lang).catch(() => {}), PREFETCH_DEBOUNCE_MS);
  }

  // The fact sheet and its verdict (reasons worded in `lang`), revalidated with
  // If-None-Match so a re-hover costs a 304. Each answer is also saved for the offline view.
  function prefetchFacts(sku, lang) {
    const key = `${lang}:${sku}`;
    const cached = state.facts.get(key);
    if (cached && Date.now() - cached.at < FRESH_MS) return Promise.resolve(cached.body);
    if (state.factsInFlight.has(key)) return state.factsInFlight.get(key);
    const promise = (async () => {
      const extra = cached && cached.etag ? { "If-None-Match": cached.etag } : {};
      const url = `/v1/products/${encodeURIComponent(sku)}/facts?locale=${lang}`;
      const response = await request(url, { headers: extra });
      if (response.status === 304 && cached) {
        cached.at = Date.now();
        return cached.body;
      }
      if (!response.ok) throw await problemOf(response);
      const body = await response.json();
      state.facts.set(key, { etag: response.headers.get("ETag"), body, at: Date.now() });
      saveVerdict(fromFacts(body), "prefetch");
      return body;
    })();
    state.factsInFlight.set(key, promise);
    promise.then(
      () => state.factsInFlight.delete(key),
      (error) => {
        state.factsInFlight.delete(key);
        if (error instanceof Unreachable) setOnline(false);
      },
    );
    return promise;
  }

  // /facts answers {facts, verdict}; the card is drawn from the `verdict` event's shape.
  function fromFacts(body) {
    const facts = body.facts || {};
    const verdict = body.verdict || {};
    return {
      verdict: verdict.verdict,
      verdict_label: verdict.verdict_label,
      confidence: verdict.confidence,
      reasons: verdict.reasons || [],
      sku: facts.sku,
      title: facts.title,
      facts,
      data_age_ms: facts.data_age_ms,
      facts_version: facts.version,
    };
  }

  // ----------------------------------------------------------------- ask --
  const worker = new Worker(new URL("worker.js", document.currentScript.src));
  worker.onmessage = (message) => {
    if (String(message.data.stream).startsWith(WATCH_STREAM)) {
      if (message.data.type === "events") message.data.events.forEach(onWatchEvent);
      return;
    }
    const stream = state.stream;
    if (!stream || message.data.stream !== stream.id) return; // a cancelled stream
    if (message.data.type === "events") {
      for (const event of message.data.events) onEvent(stream, event);
    } else if (message.data.type === "end") {
      onStreamEnd(stream);
    }
  };

  async function ask(question, sku) {
    cancelStream();
    const lang = questionLang(question);
    if (lang !== state.lang) setLang(lang, false);
    const stream = {
      id: ++state.streamSeq,
      controller: new AbortController(),
      question,
      sku,
      t0: performance.now(),
      marks: {},
      gotVerdict: false,
      done: false,
      text: "",
    };
    state.stream = stream;
    resetAnswer();
    el.status.textContent = t("checking");
    const prefetched = sku && state.facts.get(`${lang}:${sku}`);
    if (prefetched && Date.now() - prefetched.at < FRESH_MS) {
      renderVerdict(fromFacts(prefetched.body), { source: "preview", receivedAt: prefetched.at });
    }
    if (sku) loadHistory(sku);

    let response;
    try {
      const body = { question, locale: lang };
      if (sku) body.sku = sku;
      response = await request("/v1/decide", {
        method: "POST",
        headers: { "Content-Type": "application/json", Accept: "text/event-stream" },
        body: JSON.stringify(body),
        signal: stream.controller.signal,
      }, CONNECT_TIMEOUT_MS);
    } catch (error) {
      if (stream !== state.stream) return;
      if (error instanceof Unreachable) showOffline(stream);
      return;
    }
    if (stream !== state.stream) return;
    const type = response.headers.get("content-type") || "";
    if (!type.startsWith("text/event-stream")) {
      await onJsonAnswer(stream, response);
      return;
    }
    el.explanation.setAttribute("aria-busy", "true");
    el.explanation.classList.add("streaming");
    const reader = response.body.getReader();
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        if (stream !== state.stream) return;
        const bytes = value.buffer.slice(value.byteOffset, value.byteOffset + value.byteLength);
        worker.postMessage({ type: "chunk", stream: stream.id, bytes }, [bytes]);
      }
      worker.postMessage({ type: "end", stream: stream.id });
    } catch (_) {
      if (stream !== state.stream) return; // cancelled by a newer question
      stream.lost = true;
      worker.postMessage({ type: "end", stream: stream.id });
    }
  }

  function cancelStream() {
    const old = state.stream;
    if (!old) return;
    state.stream = null;
    old.controller.abort();
    worker.postMessage({ type: "abort", stream: old.id });
    flushText(old);
  }

  function mark(stream, name) {
    if (!(name in stream.marks)) stream.marks[name] = performance.now() - stream.t0;
  }

  function onEvent(stream, { event, data }) {
    if (event === "verdict") {
      mark(stream, "verdict");
      stream.gotVerdict = true;
      stream.verdict = data;
      if (data.sku && !stream.sku) {
        stream.sku = data.sku;
        loadHistory(data.sku);
      }
      if (data.sku) {
        rememberQuestion(stream.question, data.sku);
        rememberProducts([{ sku: data.sku, title: data.title, brand: data.brand || "", category: data.category || "", aliases: [] }]);
      }
      renderVerdict(data, { source: "live", receivedAt: Date.now() });
      el.status.textContent = t("writing");
    } else if (event === "token") {
      mark(stream, "first_token");
      queueText(stream, (data && data.text) || "");
    } else if (event === "done") {
      mark(stream, "done");
      stream.done = true;
      finish(stream, data || {});
    } else if (event === "error") {
      stream.done = true;
      flushText(stream);
      showProblem(new Problem((data && data.status) || 500, data));
      endStreaming();
    }
  }

  function onStreamEnd(stream) {
    if (stream.done) return; // `done` ends the answer once its words are revealed
    flushText(stream);
    endStreaming();
    // The body ended (or broke) without `done`: keep what arrived and say so.
    if (!stream.gotVerdict) {
      showOffline(stream);
      return;
    }
    if (stream.lost) setOnline(false); // the read failed; a body that simply ended is no outage
    el.status.textContent = t("lostMidway");
  }

  async function onJsonAnswer(stream, response) {
    let body = null;
    try {
      body = await response.json();
    } catch (_) {}
    if (stream !== state.stream) return;
    el.status.textContent = "";
    if (response.ok && body && body.status === "ambiguous") {
      hideVerdict();
      showCandidates(stream.question, body.candidates || []);
    } else if (response.ok && body && (body.verdict || body.ranking)) {
      // A server that answered JSON even though we asked for a stream: same fields.
      mark(stream, "verdict");
      onEvent(stream, { event: "verdict", data: body });
      if (body.explanation) queueText(stream, body.explanation);
      onEvent(stream, { event: "done", data: body });
    } else {
      hideVerdict();
      const problem = new Problem(response.status, body);
      problem.retryAfter = response.headers.get("Retry-After");
      showProblem(problem);
    }
  }

  function finish(stream, done) {
    // The template arrives whole with `done` (the model's words were refused before any
    // was sent): it is revealed as the model's would have been.
    if (typeof done.explanation === "string" && !stream.text) queueText(stream, done.explanation);
    whenRevealed(() => finishShown(stream, done));
  }

  function finishShown(stream, done) {
    if (stream !== state.stream) return;
    if (typeof done.explanation === "string" && done.explanation && done.explanation !== stream.text) {
      // The model's words were refused before any was shown: show the template the server kept.
      stream.text = done.explanation;
      el.explanation.textContent = done.explanation;
    }
    el.source.textContent = done.explanation_source === "llm" ? t("sourceLlm")
      : done.explanation_source === "template" ? t("sourceTemplate") : "";
    el.status.textContent = "";
    endStreaming();
    renderTimings(stream, done);
    if (stream.verdict) {
      saveVerdict(stream.verdict, "answer", {
        explanation: stream.text,
        explanation_source: done.explanation_source || null,
      });
    }
  }

  function endStreaming() {
    el.explanation.setAttribute("aria-busy", "false");
    el.explanation.classList.remove("streaming");
  }

  // --------------------------------------------------- progressive text --
  // The server sends the model's words a whole checked sentence at a time; the page
  // reveals them a few characters an animation frame (about 180 a second, faster than
  // anyone reads), so a sentence is seen arriving rather than dropped in at once. One
  // text node takes every write: a frame is one DOM write and one layout.
  const REVEAL_CHARS = 3;
  let pendingText = "";
  let textNode = null;
  let frame = 0;
  let afterReveal = null;

  function queueText(stream, text) {
    if (!text || stream !== state.stream) return;
    pendingText += text;
    stream.text += text;
    if (!frame) frame = requestAnimationFrame(revealStep);
  }

  function revealStep() {
    frame = 0;
    const shown = Array.from(pendingText).slice(0, REVEAL_CHARS).join("");
    appendShown(shown);
    pendingText = pendingText.slice(shown.length);
    if (pendingText) {
      frame = requestAnimationFrame(revealStep);
    } else if (afterReveal) {
      const then = afterReveal;
      afterReveal = null;
      then();
    }
  }

  function whenRevealed(then) {
    if (pendingText) afterReveal = then;
    else then();
  }

  function flushText() {
    // Everything at once (the stream ended, broke or was replaced): nothing waits.
    if (frame) cancelAnimationFrame(frame);
    frame = 0;
    afterReveal = null;
    appendShown(pendingText);
    pendingText = "";
  }

  function dropText() {
    // A new answer: what the last one had not shown yet is not shown.
    if (frame) cancelAnimationFrame(frame);
    frame = 0;
    afterReveal = null;
    pendingText = "";
    textNode = null;
  }

  function appendShown(text) {
    if (!text) return;
    if (!textNode || textNode.parentNode !== el.explanation) {
      textNode = document.createTextNode("");
      el.explanation.append(textNode);
    }
    textNode.appendData(text);
  }

  // ------------------------------------------------------------- offline --
  function showOffline(stream) {
    setOnline(false);
    endStreaming();
    const sku = stream.sku || guessSku(stream.question);
    const saved = sku && load("v." + sku);
    if (!saved) {
      hideVerdict();
      el.status.textContent = `${t("offlineAsk")} ${t("offlineNothing")}`;
      return;
    }
    const age = ago(Date.now() - saved.savedAt);
    el.status.textContent = `${t("offlineAsk")} ${t("offlineSaved", age)}`;
    renderVerdict(saved.data, { source: "saved", savedAt: saved.savedAt, savedSource: saved.source });
    el.explanation.textContent = saved.explanation || "";
    textNode = null;
    const history = load("h." + sku);
    if (history) renderChart(history.body);
  }

  window.addEventListener("offline", () => setOnline(false));
  el.retry.addEventListener("click", () => {
    const last = state.lastAsk;
    if (last) ask(last.question, last.sku);
    else setOnline(true);
  });

  // ---------------------------------------------------------------- key --
  // With auth on (`worthit serve` without --demo) every /v1 call needs a tenant's key: the
  // page asks for one when the service refuses a call for want of it, and keeps it.
  function isKeyProblem(problem) {
    return (problem.status === 401 || problem.status === 403) &&
      (problem.body || {}).field === "authorization";
  }

  function askForKey(focus) {
    el.keyForm.hidden = false;
    if (focus) el.key.focus();
  }

  el.keyForm.addEventListener("submit", (event) => {
    event.preventDefault();
    const key = el.key.value.trim();
    if (!key) return;
    save("apiKey", key);
    el.key.value = "";
    el.keyForm.hidden = true;
    const last = state.lastAsk;
    if (last) ask(last.question, last.sku);
    else el.q.focus();
  });

  // -------------------------------------------------------------- render --
  function resetAnswer() {
    state.lastAsk = { question: state.stream.question, sku: state.stream.sku };
    el.answer.hidden = false;
    el.candidates.hidden = true;
    el.explanation.textContent = "";
    dropText();
    el.source.textContent = "";
    el.timings.replaceChildren();
    el.status.textContent = "";
    el.status.classList.remove("error");
    el.status.setAttribute("role", "status");
    state.lastTimings = null;
    el.timingsCard.hidden = true;
    el.explainCard.hidden = true;
    hideVerdict();
    if (!state.stream.sku || !state.lastChart || state.lastChart.sku !== state.stream.sku) {
      el.chart.replaceChildren();
      el.chartCard.hidden = true;
      state.lastChart = null;
    }
  }

  function hideVerdict() {
    el.verdict.hidden = true;
    el.explainCard.hidden = true;
    el.verdict.dataset.verdict = "";
    el.verdict.dataset.source = "";
    state.lastShown = null;
  }

  function renderVerdict(data, how) {
    state.lastShown = { data, how };
    const known = data.sku && [state.lang, ...LANGS].map((l) => state.facts.get(`${l}:${data.sku}`)).find(Boolean);
    const facts = { ...((known && known.body.facts) || {}), ...(data.facts || {}) };
    // A ranking ("top 3 … by sales") has no verdict of its own, only ranked products.
    const kind = data.verdict || (data.ranking && data.ranking.length ? "RANKING" : "INSUFFICIENT_DATA");
    el.verdict.dataset.verdict = kind;
    el.verdict.dataset.source = how.source;
    el.verdict.classList.toggle("is-stale", how.source === "saved");
    el.verdict.classList.toggle("is-preview", how.source === "preview");
    el.title.textContent = data.title || facts.title || (kind === "RANKING" ? data.question || "" : "");
    el.sku.textContent = data.sku ? `[${data.sku}]` : "";
    // The verdict's words come from the API (one wording for the page, the templates and
    // the model's prompt); a ranking is the page's own heading.
    el.word.textContent = kind === "RANKING" ? t("ranking") : data.verdict_label || kind;
    el.confidence.textContent = typeof data.confidence === "number"
      ? t("confidence", Math.round(data.confidence * 100)) : "";

    el.numbers.replaceChildren();
    const currency = facts.currency || "USD";
    const rating = facts.rating && typeof facts.rating === "object" ? facts.rating : null;
    // With no reviews the "rating" is the prior the rules start from, not anyone's score.
    const reviews = rating ? rating.count : facts.rating_count;
    const rows = [
      [t("numPrice"), money(facts.current_price ?? facts.price, currency)],
      [t("numLow"), money(facts.all_time_low, currency)],
      [t("numAvg"), money(facts.avg_90d ?? windowAvg(facts.windows, 90), currency)],
      [t("numRating"), reviews === 0 ? t("noReviews")
        : rating && rating.bayesian != null ? t("ratingValue", rating.bayesian, rating.count)
        : typeof facts.rating === "number" ? t("ratingValue", facts.rating, facts.rating_count ?? "–") : null],
    ];
    for (const [label, value] of rows) {
      if (value == null) continue;
      const dt = document.createElement("dt");
      dt.textContent = label;
      const dd = document.createElement("dd");
      dd.textContent = value;
      el.numbers.append(dt, dd);
    }

    el.reasons.replaceChildren();
    const ranked = new Map((data.ranking || []).map((item) => [item.rank, item]));
    for (const reason of [...(data.summary || []), ...(data.reasons || [])]) {
      const li = document.createElement("li");
      li.className = `reason ${reason.polarity || "info"}`;
      li.dataset.code = reason.code || "";
      const item = ranked.get(reason.numbers && reason.numbers.rank);
      if (item && item.sku) {
        // Each ranked product is one click from its own verdict.
        const button = document.createElement("button");
        button.type = "button";
        button.className = "link";
        button.textContent = reason.text;
        button.addEventListener("click", () => ask(STRINGS[state.lang].question(item.title), item.sku));
        li.append(button);
      } else {
        li.textContent = reason.text;
      }
      el.reasons.append(li);
    }
    for (const other of data.compared || []) {
      if (other.sku === data.sku) continue;
      const li = document.createElement("li");
      li.className = "reason info compared";
      const word = other.verdict_label || other.verdict;
      const pct = typeof other.confidence === "number" ? ` · ${t("confidence", Math.round(other.confidence * 100))}` : "";
      li.textContent = `${other.title}: ${word}${pct}`;
      el.reasons.append(li);
    }

    const received = how.savedAt || how.receivedAt || Date.now();
    const ageMs = (data.data_age_ms ?? facts.data_age_ms);
    el.dataAge.textContent = ageMs == null ? "" : t("dataAge", ago(ageMs + (Date.now() - received)));
    el.version.textContent = data.facts_version ? t("version", data.facts_version) : "";
    el.stale.hidden = !(how.source === "saved" || how.source === "preview");
    el.stale.textContent = how.source === "saved" ? t("savedAt", ago(Date.now() - how.savedAt), how.savedSource)
      : how.source === "preview" ? t("preview") : "";
    el.verdict.hidden = false;
    el.explainCard.hidden = false;
    showWatch(kind === "WAIT" && how.source !== "saved" ? data.sku : null);
  }

  // ---------------------------------------------------------------- watches --
  // "Tell me when" on a WAIT card: a watch for the verdict turning BUY, delivered on
  // this tenant's SSE stream, which the page opens on the first watch it makes.
  //
  // The stream is read with fetch, not EventSource, so that it carries the page's key
  // (EventSource cannot send a header, and a key never goes in a URL); the worker parses
  // it like the answer stream. While a watch is armed, a lost stream is opened again after
  // a jittered backoff with Last-Event-ID, and the server first replays what fired in
  // between; one silent for WATCH_SILENT_MS (the server writes every 15 s) counts as lost.
  function showWatch(sku) {
    el.watch.hidden = !sku;
    el.watch.dataset.sku = sku || "";
    const armed = Boolean(sku) && [...watching.values()].includes(sku);
    el.watchButton.hidden = armed;
    el.watchButton.disabled = false;
    el.watchStatus.textContent = armed ? t("watchArmed") : "";
  }

  const watching = new Map(); // watch id → sku
  const watchLink = {
    seq: 0,
    id: null, // the worker's stream id of the open connection
    controller: null,
    ready: false,
    lastId: "", // the last SSE id seen, sent back as Last-Event-ID
    failures: 0,
    waiters: [], // openWatchStream callers waiting for `ready`
    retryTimer: 0,
    silentTimer: 0,
  };

  function openWatchStream() {
    if (watchLink.ready) return Promise.resolve();
    const ready = new Promise((resolve, reject) => watchLink.waiters.push({ resolve, reject }));
    if (!watchLink.id && !watchLink.retryTimer) connectWatchStream();
    return ready;
  }

  async function connectWatchStream() {
    clearTimeout(watchLink.retryTimer);
    watchLink.retryTimer = 0;
    const id = `${WATCH_STREAM}${++watchLink.seq}`;
    const controller = new AbortController();
    Object.assign(watchLink, { id, controller, ready: false });
    const extra = { Accept: "text/event-stream" };
    if (watchLink.lastId) extra["Last-Event-ID"] = watchLink.lastId;
    let response;
    try {
      response = await request("/v1/watches/events",
        { headers: extra, cache: "no-store", signal: controller.signal }, CONNECT_TIMEOUT_MS);
    } catch (error) {
      watchLost(id, error, true);
      return;
    }
    if (!response.ok) {
      // a key refused (401/403) will not be accepted on a retry; "not ready" (503) may be
      watchLost(id, await problemOf(response), response.status === 429 || response.status >= 500);
      return;
    }
    if (id !== watchLink.id) return;
    const reader = response.body.getReader();
    try {
      for (;;) {
        expectWatchBytes(id);
        const { done, value } = await reader.read();
        if (done) break;
        const bytes = value.buffer.slice(value.byteOffset, value.byteOffset + value.byteLength);
        worker.postMessage({ type: "chunk", stream: id, bytes }, [bytes]);
      }
    } catch (_) {
      // aborted (silent, or replaced) or broken: either way the stream is gone
    }
    worker.postMessage({ type: "end", stream: id });
    watchLost(id, new Unreachable("watch stream ended"), true);
  }

  function expectWatchBytes(id) {
    clearTimeout(watchLink.silentTimer);
    watchLink.silentTimer = setTimeout(
      () => watchLost(id, new Unreachable("watch stream silent"), true), WATCH_SILENT_MS);
  }

  function watchLost(id, error, retry) {
    if (id !== watchLink.id) return;
    clearTimeout(watchLink.silentTimer);
    watchLink.controller.abort();
    Object.assign(watchLink, { id: null, controller: null, ready: false });
    for (const waiter of watchLink.waiters.splice(0)) waiter.reject(error);
    if (!retry || !watching.size) {
      watchLink.failures = 0;
      return;
    }
    const backoff = Math.min(WATCH_RETRY_MAX_MS, WATCH_RETRY_MS * 2 ** watchLink.failures);
    watchLink.failures++;
    watchLink.retryTimer = setTimeout(connectWatchStream, backoff * (0.5 + Math.random() / 2));
  }

  function onWatchEvent({ event, data, id }) {
    if (id) watchLink.lastId = id;
    if (event === "ready") {
      watchLink.ready = true;
      watchLink.failures = 0;
      for (const waiter of watchLink.waiters.splice(0)) waiter.resolve();
    } else if (event === "watch") {
      watchFired(data);
    }
  }

  window.addEventListener("online", () => {
    if (watchLink.retryTimer) connectWatchStream(); // back now rather than after the backoff
  });

  async function startWatch() {
    const sku = el.watch.dataset.sku;
    if (!sku) return;
    el.watchButton.disabled = true;
    try {
      await openWatchStream();
      const response = await request("/v1/watches", {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ sku, condition: "verdict_buy", delivery: "sse" }),
      });
      if (!response.ok) throw await problemOf(response);
      watching.set((await response.json()).id, sku);
      showWatch(sku);
    } catch (_) {
      el.watchButton.disabled = false;
      el.watchStatus.textContent = t("watchFailed");
    }
  }

  function watchFired(body) {
    const data = (body && body.data) || {};
    if (!watching.has(data.watch_id)) return;
    watching.delete(data.watch_id);
    el.watchNoticeText.textContent = t("watchFired", data.title || data.sku, data.verdict_label || data.verdict,
      money(data.price, data.currency || "USD"));
    el.watchNotice.dataset.sku = data.sku;
    el.watchNotice.dataset.title = data.title || data.sku;
    el.watchNotice.hidden = false;
    if (el.watch.dataset.sku === data.sku) showWatch(data.sku);
  }

  el.watchButton.addEventListener("click", startWatch);
  el.watchNoticeOpen.addEventListener("click", () => {
    el.watchNotice.hidden = true;
    ask(STRINGS[state.lang].question(el.watchNotice.dataset.title), el.watchNotice.dataset.sku);
  });

  function showCandidates(question, groups, heading) {
    el.candidates.querySelector(".candidates-title").textContent = heading || t("ambiguous");
    const list = el.candidates.querySelector("ul");
    list.replaceChildren();
    for (const group of groups) {
      for (const candidate of group.candidates || []) {
        const li = document.createElement("li");
        const button = document.createElement("button");
        button.type = "button";
        button.className = "candidate";
        button.textContent = candidate.title;
        const sku = document.createElement("span");
        sku.className = "sku";
        sku.textContent = candidate.sku;
        button.append(" ", sku);
        button.addEventListener("mouseenter", () => schedulePrefetch(candidate.sku));
        button.addEventListener("focus", () => schedulePrefetch(candidate.sku));
        button.addEventListener("click", () => ask(question, candidate.sku));
        li.append(button);
        list.append(li);
      }
    }
    el.candidates.hidden = false;
  }

  function showProblem(problem) {
    el.status.classList.add("error");
    const body = problem.body || {};
    if (isKeyProblem(problem)) {
      el.status.textContent = t(load("apiKey") ? "keyRefused" : "keyNeeded");
      askForKey(true);
    } else if (problem.status === 404 && body.mention) {
      el.status.textContent = t("notFound", body.mention);
      const near = (body.candidates || []).filter((group) => (group.candidates || []).length);
      if (near.length && state.lastAsk) showCandidates(state.lastAsk.question, near, t("didYouMean"));
    } else if (problem.status === 429) {
      el.status.textContent = t("rateLimited", problem.retryAfter || "?");
    } else {
      el.status.textContent = `${body.title || t("problem")}${body.detail ? `: ${body.detail}` : ""}`;
    }
    el.status.setAttribute("role", "alert");
  }

  function renderTimings(stream, done) {
    state.lastTimings = [stream, done];
    el.timings.replaceChildren();
    el.timingsCard.hidden = false;
    const stages = Object.entries(done.timings_ms || {})
      .filter(([name, v]) => typeof v === "number" && !ENGINE_INTERNALS.has(name));
    if (stages.length) {
      const max = Math.max(...stages.map(([, v]) => v), 1);
      const table = document.createElement("table");
      table.className = "stages";
      const caption = document.createElement("caption");
      caption.textContent = t("stages");
      table.append(caption);
      for (const [name, ms] of stages) {
        const row = table.insertRow();
        row.dataset.stage = name;
        const th = document.createElement("th");
        th.scope = "row";
        th.textContent = name.replace(/_/g, " ");
        const bar = row.insertCell();
        bar.className = "bar";
        const fill = document.createElement("span");
        fill.style.width = `${Math.max(1, (ms / max) * 100)}%`;
        bar.append(fill);
        const value = row.insertCell();
        value.className = "ms";
        value.textContent = ms < 10 ? ms.toFixed(1) : Math.round(ms).toString();
        row.prepend(th);
      }
      el.timings.append(table);
    }
    const client = document.createElement("p");
    client.className = "client";
    const parts = [];
    for (const [key, label] of [["verdict", "toVerdict"], ["first_token", "toFirstToken"], ["done", "toDone"]]) {
      if (key in stream.marks) parts.push(`${t(label)} ${Math.round(stream.marks[key])} ms`);
    }
    const tokens = done.tokens || {};
    const generated = tokens.completion ?? tokens.completion_tokens ?? tokens.generated;
    if (typeof generated === "number" && generated > 0) parts.push(t("tokens", generated));
    client.textContent = `${t("browser")}: ${parts.join(" · ")}`;
    client.dataset.testid = "client-timings";
    el.timings.append(client);
  }

  // --------------------------------------------------------------- chart --
  async function loadHistory(sku) {
    const cached = state.history.get(sku);
    if (cached && Date.now() - cached.at < FRESH_MS) {
      renderChart(cached.body);
      return;
    }
    try {
      const response = await request(`/v1/products/${encodeURIComponent(sku)}/history?days=180`);
      if (!response.ok) throw await problemOf(response);
      const body = await response.json();
      state.history.set(sku, { body, at: Date.now() });
      save("h." + sku, { savedAt: Date.now(), body });
      if (state.stream && state.stream.sku === sku || state.lastShown && state.lastShown.data.sku === sku) {
        renderChart(body);
      }
    } catch (error) {
      if (error instanceof Unreachable) {
        setOnline(false);
        const saved = load("h." + sku);
        if (saved) renderChart(saved.body);
      }
    }
  }

  const SVG = "http://www.w3.org/2000/svg";
  const DAY_MS = 86_400_000;

  function svg(name, attrs, text) {
    const node = document.createElementNS(SVG, name);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
    if (text != null) node.textContent = text;
    return node;
  }

  // A step line of the price (a price holds until the next one is recorded), the 90-day
  // average as a dashed line, and the all-time low as a line with a dot where it was seen.
  function renderChart(history) {
    const points = (history.points || [])
      .map((p) => ({ t: Date.parse(p.ts), price: Number(p.price) }))
      .filter((p) => Number.isFinite(p.t) && Number.isFinite(p.price))
      .sort((a, b) => a.t - b.t);
    state.lastChart = history;
    el.chartCard.hidden = false;
    chartWidth = el.chart.clientWidth;
    el.chart.replaceChildren();
    // the title says the span drawn: a 12-day history is not "the last 180 days"
    el.chartTitle.textContent = t("chart",
      points.length ? Math.round((points[points.length - 1].t - points[0].t) / DAY_MS) : null);
    if (!points.length) {
      const empty = document.createElement("p");
      empty.className = "empty";
      empty.textContent = t("noHistory");
      el.chart.append(empty);
      return;
    }
    const currency = history.currency || "USD";
    const low = Number.isFinite(history.all_time_low) ? history.all_time_low : Math.min(...points.map((p) => p.price));
    const avg = Number.isFinite(history.avg_90d) ? history.avg_90d : null;
    // Drawn at the container's own width, so 11px labels stay 11px on a phone.
    const W = Math.max(300, Math.round(el.chart.clientWidth || 640));
    const H = W < 480 ? 190 : 240;
    // The labels sit in a band above the plot, which the lines never enter (placed on the
    // lines they covered the price line on a phone); the legend under the chart keys them.
    const left = 52, right = 10, top = 34, bottom = 28, band = 16;
    const values = points.map((p) => p.price).concat([low], avg == null ? [] : [avg]);
    let lo = Math.min(...values), hi = Math.max(...values);
    const pad = (hi - lo) * 0.08 || hi * 0.05 || 1;
    lo -= pad;
    hi += pad;
    const t0 = points[0].t;
    const t1 = Math.max(points[points.length - 1].t, t0 + 1);
    const x = (tt) => left + ((tt - t0) / (t1 - t0)) * (W - left - right);
    const y = (v) => top + (1 - (v - lo) / (hi - lo)) * (H - top - bottom);

    const label = t("chartLabel", money(low, currency), history.all_time_low_at, money(avg, currency) || "–");
    const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": label, class: "price-chart" });
    root.append(svg("title", {}, label));

    // grid and y ticks
    for (let i = 0; i <= 3; i++) {
      const v = lo + ((hi - lo) * i) / 3;
      root.append(svg("line", { x1: left, x2: W - right, y1: y(v), y2: y(v), class: "grid" }));
      root.append(svg("text", { x: left - 8, y: y(v) + 4, class: "tick", "text-anchor": "end" }, money(v, currency, 0)));
    }
    // month ticks
    const first = new Date(t0);
    const month = new Date(Date.UTC(first.getUTCFullYear(), first.getUTCMonth() + 1, 1));
    const fmt = new Intl.DateTimeFormat(LOCALES[state.lang], { month: "short", timeZone: "UTC" });
    for (let m = month; m.getTime() <= t1; m = new Date(Date.UTC(m.getUTCFullYear(), m.getUTCMonth() + 1, 1))) {
      const xm = x(m.getTime());
      root.append(svg("line", { x1: xm, x2: xm, y1: H - bottom, y2: H - bottom + 4, class: "axis" }));
      root.append(svg("text", { x: xm, y: H - 8, class: "tick", "text-anchor": "middle" }, fmt.format(m)));
    }

    let d = `M${x(points[0].t).toFixed(1)},${y(points[0].price).toFixed(1)}`;
    for (let i = 1; i < points.length; i++) {
      d += `H${x(points[i].t).toFixed(1)}V${y(points[i].price).toFixed(1)}`;
    }
    d += `H${x(t1).toFixed(1)}`;
    const area = `${d}V${(H - bottom).toFixed(1)}H${x(points[0].t).toFixed(1)}Z`;
    root.append(svg("path", { d: area, class: "area" }));
    root.append(svg("path", { d, class: "price" }));

    if (avg != null) {
      root.append(svg("line", { x1: left, x2: W - right, y1: y(avg), y2: y(avg), class: "avg", "data-testid": "avg90" }));
      root.append(svg("text", { x: W - right, y: band, class: "note avg-note", "text-anchor": "end" },
        t("avgLabel", money(avg, currency))));
    }
    root.append(svg("line", { x1: left, x2: W - right, y1: y(low), y2: y(low), class: "low", "data-testid": "atl" }));
    const lowDay = history.all_time_low_at ? Date.parse(`${history.all_time_low_at.slice(0, 10)}T12:00:00Z`) : NaN;
    const lowPoint = points.filter((p) => Math.abs(p.price - low) < 0.005).pop();
    const at = lowPoint ? lowPoint.t : lowDay >= t0 && lowDay <= t1 ? lowDay : NaN;
    if (Number.isFinite(at)) root.append(svg("circle", { cx: x(at), cy: y(low), r: 5, class: "low-dot" }));
    root.append(svg("text", { x: left, y: band, class: "note low-note" }, t("lowLabel", money(low, currency))));
    el.chart.append(root);
  }

  // -------------------------------------------------------------- format --
  // As the reasons write money (worthit.text.money, CLDR through Babel): the language's
  // main locale, its standard symbol (US$ in Chinese, JP¥ for yen there), the currency's
  // own minor units (¥5,490, $242.35). `digits` is only for the chart's axis ticks.
  const MONEY_LOCALES = { en: "en-US", zh: "zh-CN", ja: "ja-JP" };
  function money(value, currency, digits) {
    if (value == null || !Number.isFinite(Number(value))) return null;
    const options = { style: "currency", currency };
    if (digits != null) Object.assign(options, { minimumFractionDigits: digits, maximumFractionDigits: digits });
    try {
      return new Intl.NumberFormat(MONEY_LOCALES[state.lang] || "en-US", options).format(Number(value));
    } catch (_) {
      return `${currency} ${Number(value)}`;
    }
  }

  function windowAvg(windows, days) {
    const w = (windows || []).find((item) => item.days === days);
    return w ? w.avg : null;
  }

  function ago(ms) {
    const a = STRINGS[state.lang].ago;
    const minutes = Math.floor(Math.max(0, ms) / 60_000);
    if (minutes < 1) return a.now;
    if (minutes < 60) return a.min(minutes);
    const hours = Math.floor(minutes / 60);
    if (hours < 48) return a.hour(hours, minutes % 60);
    return a.day(Math.floor(hours / 24));
  }

  let chartWidth = 0;
  new ResizeObserver(() => {
    const width = el.chart.clientWidth;
    if (state.lastChart && Math.abs(width - chartWidth) > 24) renderChart(state.lastChart);
  }).observe(el.chart);

  // ---------------------------------------------------------------- boot --
  el.lang.addEventListener("click", () => setLang(LANGS[(LANGS.indexOf(state.lang) + 1) % LANGS.length], true));
  setLang(state.lang, false);
  const initial = new URLSearchParams(location.search);
  if (initial.get("q")) {
    el.q.value = initial.get("q");
    ask(initial.get("q"), initial.get("sku"));
  }
})();
