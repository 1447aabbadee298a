// Model output is untrusted: Markdown is rendered by marked and the HTML cleaned by DOMPurify
// (no scripts, no event handlers, no javascript: links, no styles), then handed to the DOM as
// a fragment — the page never assigns model text to innerHTML.
const PURIFY = {
  USE_PROFILES: { html: true },
  FORBID_TAGS: ['style', 'form', 'input', 'button', 'textarea', 'select', 'iframe', 'object', 'embed'],
  FORBID_ATTR: ['style'],
  RETURN_DOM_FRAGMENT: true,
};

export function renderMarkdown(text) {
  const html = window.marked.parse(text, { gfm: true, breaks: true, mangle: false, headerIds: false });
  const fragment = window.DOMPurify.sanitize(html, PURIFY);
  for (const a of fragment.querySelectorAll('a')) {
    a.rel = 'noopener noreferrer';
    a.target = '_blank';
  }
  return fragment;
}
