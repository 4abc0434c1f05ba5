/* exercises_03.h - chapter 03's exercises (filled in by the chapter). */
