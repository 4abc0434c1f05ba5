/* exercises_04.h - chapter 04's exercises (filled in by the chapter). */
