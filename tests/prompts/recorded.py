"""The citation-format examples shipped before issue #33, under which the recorded small-model
replies of the echo tests were made: they held placeholder prose ("Answer: your answer") that
models copied. The shipped prompts no longer do, but a reply copying what it was sent must still
be an echo, so those tests compare the recorded replies with the prompt they were recorded under."""

from __future__ import annotations

RECORDED_CITATION_FORMAT: dict[str, str] = {
    'en': 'The documents are numbered <doc0>, <doc1>, and so on. Reply in exactly the format below. Keep the three '
          'headers "Cited Documents:", "{answer_header}" and "Explanation:" in English, exactly as written.\nCited '
          'Documents: the documents you used, for example <doc0>, <doc2>\n{answer_header} your answer\nExplanation: '
          'because … (cite the documents inline, for example <doc1>)',
    'ar': 'المستندات مرقّمة على النحو <doc0>، <doc1>، وهكذا. أجب بالتنسيق التالي تمامًا. أبقِ العناوين الثلاثة "Cited '
          'Documents:" و"{answer_header}" و"Explanation:" باللغة الإنجليزية كما هي مكتوبة بالضبط.\nCited Documents: '
          'المستندات التي استخدمتها، مثل <doc0>, <doc2>\n{answer_header} إجابتك\nExplanation: لأن … (استشهد بالمستندات '
          'داخل النص نفسه، مثل <doc1>)',
    'de': 'Die Dokumente sind als <doc0>, <doc1> usw. nummeriert. Antworte genau im folgenden Format. Behalte die drei '
          'Überschriften "Cited Documents:", "{answer_header}" und "Explanation:" auf Englisch bei, genau so, wie sie '
          'hier stehen.\nCited Documents: die Dokumente, die du verwendet hast, z. B. <doc0>, <doc2>\n{answer_header} '
          'deine Antwort\nExplanation: weil … (zitiere die Dokumente direkt im Text, z. B. <doc1>)',
    'es': 'Los documentos están numerados como <doc0>, <doc1>, etc. Responde exactamente con el formato siguiente. '
          'Mantén los tres encabezados "Cited Documents:", "{answer_header}" y "Explanation:" en inglés, tal como '
          'están escritos.\nCited Documents: los documentos que usaste, por ejemplo <doc0>, <doc2>\n{answer_header} tu '
          'respuesta\nExplanation: porque … (cita los documentos dentro del texto, por ejemplo <doc1>)',
    'zh': '文档按 <doc0>、<doc1> 等依次编号。请严格按照下面的格式回答，'
          '并保留 "Cited Documents:"、"{answer_header}" 和 "Explanation:" '
          '这三个英文标题，一字不改。\nCited Documents: 你使用的文档，例如 <doc0>, <doc2>\n'
          '{answer_header} 你的答案\nExplanation: 因为……（在正文中用 '
          '<doc1> 这样的标记引用文档）',
}


def recorded_format(lang: str, answer_header: str) -> str:
    """The recorded example block of ``lang``, rendered as it was sent."""
    return RECORDED_CITATION_FORMAT[lang].format(answer_header=answer_header)
