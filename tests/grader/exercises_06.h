/* exercises_06.h - chapter 06's exercises (filled in by the chapter). */
