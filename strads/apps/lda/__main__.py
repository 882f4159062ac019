"""python -m strads.apps.lda [--data FILE] [flags]; see --help."""
import sys

from ... import cli, driver
from ...params import Param
from . import PARAMS, LDAUpdate, corpus_source, file_source, make_setup, top_words
from .data import FORMATS, check_corpus_size, guess_vocab

MODULE = "strads.apps.lda"


def build_parser():
    p = cli.parser(MODULE, "LDA topic model by collapsed Gibbs sampling, model-parallel "
                   "with rotating vocabulary slices (STRADS). --data reads UCI bag-of-words "
                   "(docword.*.txt + vocab.*.txt), LDA-C (*.ldac: 'N id:count ...') or plain "
                   "text (one document per line).", max_rounds=10 ** 9, tol=0.0,
                   tol_note="; 0 here, not 1e-6 as elsewhere: a Gibbs chain's "
                   "log-likelihood fluctuates, never settles, so --sweeps ends the run")
    cli.add_flags(p.add_argument_group("lda"), PARAMS + (
        Param("top_words", 10, "print the N top words of each topic at the end (0: none)",
              low=0, metavar="N", resume=True),
        Param("format", "auto", "--data format; auto: by its first lines, whatever its "
              "name: three lines of one integer (D, W, NNZ): UCI; a first line 'N "
              "id:count ...': LDA-C; else text", choices=FORMATS),
        Param("vocab", None, "vocabulary (one word per line) for UCI/LDA-C data; default, beside "
              "--data: vocab.<name>.txt for a docword.<name>.txt, else <stem>.tokens, "
              "<stem>.vocab or vocab.txt (each also .gz)", kind=str,
              metavar="PATH"),
        Param("min_count", 2, "text data: drop words seen fewer times in the whole corpus",
              low=1)))
    cli.add_flags(p.add_argument_group("built-in corpus (no --data), drawn from the LDA "
                                       "model"), (
        Param("n_docs", 1000, "documents", low=1),
        Param("n_words", 1000, "vocabulary size", low=1),
        Param("doc_length", 100, "mean tokens per doc", low=1),
        Param("true_topics", None, "topics of the generating model; none: --topics",
              kind=int, low=1, none=True),
        Param("true_beta", 0.05, "Dirichlet prior the true topics are drawn from", low=0,
              closed="neither")))
    return p


def run(args):
    true_topics = args.true_topics or args.n_topics
    # the workers read the file or draw the built-in corpus themselves: rank 0 holds
    # nothing of it
    if args.data:
        data = file_source(args.data, args.format, args.vocab, args.min_count)
        found = None if args.vocab or args.format == "text" else guess_vocab(args.data)
        if found and not args.quiet and cli.launched_rank() == 0:  # (it sets W: say so)
            sys.stderr.write(f"[lda] the words of UCI or LDA-C data: {found}, found beside "
                             "--data (--vocab names another)\n")
    else:
        data = corpus_source(args.n_docs, args.n_words, args.doc_length, true_topics,
                             args.alpha, args.true_beta, args.seed)
    # the flags first (one line each), then the built-in corpus's size before it is drawn
    setup = make_setup(data, args.n_topics, args.alpha, args.beta, args.schedule, args.sweeps,
                       args.seed, cli=True)
    if not args.data:
        check_corpus_size(args.n_docs, args.n_words, args.doc_length, true_topics, {
            "n_docs": "--n-docs", "n_words": "--n-words", "doc_length": "--doc-length",
            "n_topics": "--true-topics" if args.true_topics else "--topics"})
    return driver.run(setup, LDAUpdate, app="lda", **cli.engine_kwargs(args))


def main(argv=None):
    p = build_parser()
    args = p.parse_args(argv)
    given = [d for d in ("format", "vocab", "min_count") if args.data is None and
             getattr(args, d) != p.get_default(d)]
    if given:  # (as the built-in corpus's flags are with --data)
        p.refuse(f"--{given[0].replace('_', '-')} describes a --data file; it has no "
                 "effect on the built-in corpus")
    result = cli.main(MODULE, run, args)
    if result is not None and args.top_words:
        vocab = result.model.get("vocab")
        wt = result.model["word_topic"]
        share = wt.sum(axis=0) / max(1, wt.sum())
        for k, words in enumerate(top_words(wt, vocab, args.top_words)):
            cli.say(f"topic {k:3d} ({100 * share[k]:4.1f}%): {' '.join(words)}")
    return result


if __name__ == "__main__":
    main()
