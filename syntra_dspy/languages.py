"""Language names for prompts and a script check for generated text (no model needed)."""

from __future__ import annotations

import re

_NAMES = {
    "en": "English",
    "zh": "Chinese (Simplified)",
    "ja": "Japanese",
    "ko": "Korean",
    "fr": "French",
    "de": "German",
    "es": "Spanish",
    "ru": "Russian",
    "fa": "Persian",
    "ar": "Arabic",
}
#: Chinese characters (and Japanese kanji), as the inside of a regular-expression character class.
HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_CJK = re.compile(f"[{HAN}]")
_CJK_RUN = re.compile(_CJK.pattern + "+")
_LATIN = re.compile(r"[A-Za-z\u00c0-\u024f]")
#: Languages written in Chinese/Japanese characters.
CJK_LANGUAGES = frozenset({"zh", "ja"})


_ISO3 = {"eng": "en", "zho": "zh", "chi": "zh", "cmn": "zh", "fas": "fa", "per": "fa", "rus": "ru", "fra": "fr",
         "deu": "de", "spa": "es", "jpn": "ja", "kor": "ko", "ara": "ar"}


def language_code(code: str) -> str:
    """ISO 639-1 for a 639-1 or common 639-2/3 code (``zho`` -> ``zh``, ``EN`` -> ``en``)."""
    code = code.strip().lower()
    return _ISO3.get(code, code)


def language_name(code: str) -> str:
    """Human-readable name for an ISO 639-1 code; unknown codes are shown as given."""
    return _NAMES.get(code.lower(), code)


def cjk_share(text: str) -> float:
    """Share of the text's letters that are Chinese/Japanese characters (0.0 when it has no letters)."""
    cjk = len(_CJK.findall(text))
    letters = cjk + len(_LATIN.findall(text))
    return cjk / letters if letters else 0.0


def left_cjk_words(text: str, code: str) -> list[str]:
    """The runs of Chinese/Japanese characters in ``text``, once each in order, when ``code`` is a language not
    written in them (words a cross-language writer left untranslated); [] otherwise."""
    if code.lower() in CJK_LANGUAGES or code.lower() == "ko" or not _LATIN.search(text):
        return []
    return list(dict.fromkeys(_CJK_RUN.findall(text)))


def check_language(text: str, code: str) -> str | None:
    """Return a problem description when ``text`` is visibly not in language ``code``, else None.

    Only the script is checked (CJK versus Latin), which is what matters for the cross-language case:
    English queries over Chinese documents must not come out in Chinese, and the reverse.
    """
    if not _CJK.search(text) and not _LATIN.search(text):
        return "contains no words"
    share_cjk = cjk_share(text)
    code = code.lower()
    if code in CJK_LANGUAGES and share_cjk < 0.5:
        return f"is not written in {language_name(code)}"
    if code not in CJK_LANGUAGES and code not in {"ko"}:
        if share_cjk > 0.1:
            return f"is not written in {language_name(code)} (it contains Chinese/Japanese characters)"
        left = left_cjk_words(text, code)
        if left:
            # A word the writer did not translate ("low渗透 oil reservoirs"): a searcher writing in this language
            # would not type it, and no lexical index of this language finds it.
            shown = ", ".join(f"'{w}'" for w in left)
            return f"keeps Chinese/Japanese characters ({shown}) untranslated"
    return None
